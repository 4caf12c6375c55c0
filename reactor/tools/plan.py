"""`reactor plan`: what the reactor would do for one notification, and why — writing nothing.

It runs the real engine with dry run forced on, against a real cluster (kubeconfig) or an embedded one
seeded from manifests (by default the demo cluster with the demo's policy), so SREs can tune rules and
policy before enforcing. It never writes to a real cluster: dry run is forced whatever the policy says.

Rebalancing (`rebalance.enabled`): the donors' idle alerts are the firing alerts of the same `--alerts` file
(`NotificationAlerts`), never a live Alertmanager, so a plan is offline and repeatable: put the receiver's
saturation and the donors' idleness in one file. The plan then names the receiver's refusal, each candidate donor
with why it was or was not chosen, the donor's change, and the receiver's growth that follows it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Collection, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Settings, load_settings
from reactor.core.errors import ConfigError, InvalidPayload, TemporaryError, UsageError
from reactor.core.firing import FiringAlerts
from reactor.core.metrics import Metrics
from reactor.core.model import Alert, Notification
from reactor.core.outcome import Outcome
from reactor.intake.alerts import parse_notification
from reactor.intake.web import Handler
from reactor.state.seal import StateKeys, load_state_keys
from reactor.tools.seeds import apply_seeds, demo_file, read_seeds

OUTPUTS = ("text", "json")
# The demo's example notifications, shipped in the package: `reactor plan --example NAME` reads them from an
# installed wheel as well as from a checkout.
EXAMPLES = ("underutilized", "idle", "saturated", "metrics-missing", "rebalance")
# `--example rebalance` plans on the demo cluster and the demo's shared quota (demo_data/rebalance.yaml: an idle
# training donor and a saturated inference receiver), with rebalancing on: its donors are the GPUIdle alerts of the
# same example file, as for any plan (Alertmanager is never asked; the URL below is only what the policy requires).
REBALANCE_EXAMPLE = {"REACTOR_REBALANCE__ENABLED": "true", "REACTOR_REBALANCE__ALERTMANAGER_URL": "http://127.0.0.1:9"}


def example_path(name: str) -> str:
    """The example notification NAME (one of EXAMPLES) as a path on disk."""
    return str(demo_file(f"alerts-{name}.json"))


# How the plan gets its engine: the application assembly's `build_engine`, handed in by the command line (a tool
# never reaches up into the assembly), with the policy in dry run and the plan's own source of idle donors.
BuildEngine = Callable[[Settings, KubeGateway, Metrics, StateKeys | None, FiringAlerts], Handler]


def run_plan(*, alerts: str, config: str | None, kubeconfig: str | None, seeds: list[str] | None,
             build: BuildEngine, output: str = "text", example: str | None = None) -> int:
    """Print the plan; 0 when it was made, 1 when the cluster did not answer. Bad arguments raise `UsageError`."""
    notification = read_notification(alerts)
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {kubeconfig}", "no such file; give the path of a kubeconfig file")
    environ = None
    if example == "rebalance" and kubeconfig is None and not seeds:
        seeds = [str(demo_file("cluster.yaml")), str(demo_file("rebalance.yaml"))]
        config = config or str(demo_file("policy.yaml"))
        environ = {**os.environ, **REBALANCE_EXAMPLE}
    if config is None and kubeconfig is None and not seeds:
        config = str(demo_file("policy.yaml"))  # the demo cluster, planned with the demo's policy
    settings = load_settings(config, environ)
    settings = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    try:
        outcomes = _plan(notification, settings, kubeconfig=kubeconfig, seeds=seeds or [], build=build)
    except TemporaryError as e:
        print(f"reactor plan: the cluster did not answer: {e}", file=sys.stderr)
        return 1
    if kubeconfig is None and not seeds and any(o.reason == "not-found" for o in outcomes):
        print("reactor plan: note: planned against the demo cluster, which has no such pod; its pods are named in "
              f"the examples (--example {'|'.join(EXAMPLES)}) — or pass --seed or --kubeconfig for your own",
              file=sys.stderr)
    unverified = sum(o.reason == "unauthenticated-state" for o in outcomes)
    if unverified and settings.server.state_key_file is None:
        # A laptop never holds the reactor's key: its own records then read as unsigned. They are the reactor's
        # memory (cooldowns, originals to revert to): removing them would make it forget, never act better.
        print(f"reactor plan: note: {unverified} alert(s) name workloads whose reactor records this plan cannot "
              "verify: no state key was given, so the reactor's own signed records read as unsigned. Plan with the "
              "key the reactor runs with (a policy file whose state.keyFile names a copy of its state-key Secret, "
              "or REACTOR_STATE__KEY_FILE); do not remove those records", file=sys.stderr)
    if output == "json":
        print(json.dumps({"outcomes": [o.to_json() for o in outcomes]}, indent=2))
    else:
        print_plan(outcomes, settings)
    return 0


def read_notification(path: str) -> Any:
    """The parsed notification in the file; a missing file, bad JSON or a bad payload is a `UsageError`."""
    flag = f"--alerts {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(flag, f"cannot read: {e.strerror}; give an Alertmanager webhook body (JSON)") from e
    except UnicodeDecodeError as e:
        raise UsageError(flag, f"not UTF-8 text (byte {e.start}); Alertmanager sends JSON in UTF-8") from None
    try:
        body = json.loads(text)
    except ValueError as e:
        raise UsageError(flag, f"not JSON: {e}") from e
    try:
        return parse_notification(body)
    except InvalidPayload as e:
        raise UsageError(flag, f"not a valid Alertmanager payload: {e}") from e


def _plan(notification: Any, settings: Settings, *, kubeconfig: str | None, seeds: list[str],
          build: BuildEngine) -> list[Outcome]:
    metrics = Metrics()
    with ExitStack() as stack:
        if kubeconfig is not None:
            kube = _connect(settings, kubeconfig, metrics)
        else:
            kube = _embedded(stack, seeds, settings, metrics)
        stack.callback(kube.close)
        keys = load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file)
        return build(settings, kube, metrics, keys, NotificationAlerts(notification)).handle(notification)


class NotificationAlerts:
    """The plan's source of idle donors (core.firing.FiringAlerts): the firing alerts of the planned notification."""

    def __init__(self, notification: Notification) -> None:
        self.alerts = notification.alerts

    def firing(self, namespace: str, alertnames: Collection[str]) -> Sequence[Alert]:
        return [a for a in self.alerts if a.firing and a.namespace == namespace and a.name in alertnames]


def _connect(settings: Settings, kubeconfig: str, metrics: Metrics) -> KubeGateway:
    try:
        return KubeGateway.connect(dataclasses.replace(settings.kube, kubeconfig=kubeconfig), metrics)
    except ConfigError as e:
        raise UsageError(f"--kubeconfig {kubeconfig}", e.problem) from e


def _embedded(stack: ExitStack, seeds: list[str], settings: Settings, metrics: Metrics) -> KubeGateway:
    from reactor_sim import SimCluster

    found = read_seeds(seeds)
    sim = SimCluster().start()
    stack.callback(sim.stop)
    apply_seeds(sim, found)
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
            if o.detail:
                print(f"    which: {o.detail}")
        else:
            detail, _, rebalance = (o.detail or "").partition("; rebalance plan: ")
            print(f"  {verdict}: {o.reason}" + (f" — {detail}" if detail else ""))
            if rebalance:
                plan, _, donors = rebalance.partition("; donors considered: ")
                print(f"  rebalance plan: {plan}")
                for line in donors.split("; ") if donors else ():
                    print(f"    donor {line}")
        for strategy, reason in o.considered:
            print(f"    considered {strategy}: {'applies' if reason is None else reason}")
