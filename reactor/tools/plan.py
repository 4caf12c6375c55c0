"""`reactor plan`: what the reactor would do for one notification, and why — writing nothing.

It runs the real engine with dry run forced on, against a real cluster (kubeconfig) or an
embedded one seeded from manifests, so SREs can tune rules and policy before enforcing.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ..alerts import parse_notification
from ..engine import Engine
from ..errors import ConfigError, InvalidPayload, TemporaryError
from ..kube import KubeGateway
from ..metrics import Metrics
from ..outcome import Outcome
from ..settings import Settings, load_settings
from ..statemac import load_state_keys


def run_plan(*, alerts: str, config: str | None, kubeconfig: str | None, seeds: list[str] | None) -> int:
    settings = load_settings(config)
    settings = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    notification = _read_notification(alerts)
    metrics = Metrics()
    with ExitStack() as stack:
        if seeds:
            kube = _embedded(stack, seeds, settings, metrics)
        else:
            kube_settings = dataclasses.replace(settings.kube, kubeconfig=kubeconfig or settings.kube.kubeconfig)
            kube = KubeGateway.connect(kube_settings, metrics)
        stack.callback(kube.close)
        keys = load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file)
        engine = Engine(settings=settings, kube=kube, metrics=metrics, state_keys=keys)
        try:
            outcomes = engine.handle(notification)
        except TemporaryError as e:
            print(f"reactor plan: the cluster did not answer: {e}", file=sys.stderr)
            return 1
    print_plan(outcomes, settings)
    return 0


def _read_notification(path: str) -> Any:
    try:
        body = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(path, f"cannot read the notification: {e}") from e
    try:
        return parse_notification(body)
    except InvalidPayload as e:
        raise ConfigError(path, f"not a valid Alertmanager payload: {e}") from e


def _embedded(stack: ExitStack, seeds: list[str], settings: Settings, metrics: Metrics) -> KubeGateway:
    from ..sim import SimCluster

    sim = SimCluster().start()
    stack.callback(sim.stop)
    for seed in seeds:
        sim.load_manifests(Path(seed))
    sim.settle()
    return KubeGateway.for_url(sim.url, settings.kube, metrics)


def print_plan(outcomes: list[Outcome], settings: Settings) -> None:
    if not settings.policy.allow:
        print("note: namespaces.allow is empty, so every alert is refused; set it in the policy file\n")
    for o in outcomes:
        target = o.workload or f"{o.namespace}/{o.pod}"
        verdict = "would apply" if o.result == "recommended" else o.result
        print(f"{o.alert} ({o.status}) pod {o.namespace}/{o.pod}")
        print(f"  workload: {target}")
        if o.action is not None:
            print(f"  {verdict}: {o.summary}")
        else:
            print(f"  {verdict}: {o.reason}" + (f" — {o.detail}" if o.detail else ""))
        for strategy, reason in o.considered:
            print(f"    considered {strategy}: {'applies' if reason is None else reason}")
