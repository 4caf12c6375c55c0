"""Latency to effect: a one-alert notification until its patch is visible in the cluster.

Method: the reactor is assembled in the bench process exactly as `reactor serve` assembles it
(settings → gateway over real HTTP → engine → Flask app) and fed through the Flask test client,
so everything from intake to answer runs except gunicorn's socket handling. Its gateway is
wrapped so every API call is timed on the client side (rate limiter, client library, HTTP, the
API server's handling). The effect is visible the moment the PATCH is answered: the simulator
commits under its store lock before it answers, and the bench checks with `sim.get` afterwards.
Per run: time to effect = from the POST until the PATCH returned; API share = the API calls'
time within it. Each run acts on its own Deployment, so none is in cooldown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from bench.loadgen import quantile
from bench.scenario import CONTAINER, GPU, LATENCY_WORKLOADS, POLICY, confirm, latency_workload, prometheus
from reactor.app.assembly import assemble
from reactor.app.logs import JsonFormatter
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster


class TimedGateway(KubeGateway):
    """The gateway, recording (verb, resource, start, end) of every call it makes."""

    calls: list[tuple[str, str, float, float]]

    def _call(self, verb: str, resource: str, send: Callable[..., Any], *, retries: int | None = None) -> Any:
        started = time.perf_counter()
        try:
            return super()._call(verb, resource, send, retries=retries)
        finally:
            self.calls.append((verb, resource, started, time.perf_counter()))


def _quantile(values: list[float], q: float) -> float:
    return quantile(sorted(values), q)


def run_latency(sim: SimCluster, tmp: Path, token: str, runs: int = LATENCY_WORKLOADS) -> dict[str, Any]:
    (tmp / "latency-token").write_text(token)
    doc = dict(POLICY, server={**POLICY["server"], "tokenFile": str(tmp / "latency-token")},
               state={"keyFile": str(state_key_file(tmp))})
    settings = build_settings({**doc, "confirm": confirm()}, {})
    metrics = Metrics(CollectorRegistry())
    kube = TimedGateway.for_url(sim.url, settings.kube, metrics)
    kube.calls = []
    service = assemble(settings, kube=kube, metrics=metrics)
    client = service.app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    effect: list[float] = []
    answer: list[float] = []
    api_share: list[float] = []
    api_calls = 0
    # Decision logs as `reactor serve` writes them (JSON, INFO), into a file rather than the table.
    log = logging.getLogger("reactor")
    handler = logging.FileHandler(tmp / "latency.log")
    handler.setFormatter(JsonFormatter())
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        for i in range(min(runs, LATENCY_WORKLOADS)):
            ns, name = latency_workload(i)
            pod = sim.list("pods", ns, label_selector=f"app={name}")[0]["metadata"]["name"]
            body = notification([AlertSpec("GPUUnderutilized", ns, pod, CONTAINER, 0.1, 2)])
            prometheus().observe(body)  # a genuine alert: the rules fire it
            kube.calls.clear()
            started = time.perf_counter()
            response = client.post("/alerts", json=body, headers=headers)
            answered = time.perf_counter()
            outcome = response.get_json()["outcomes"][0]
            if response.status_code != 200 or outcome["result"] != "applied":
                raise RuntimeError(f"latency run {i}: {response.status_code} {outcome}")
            patched = next(end for verb, _res, _s, end in kube.calls if verb == "patch")
            limits = sim.get("deployments", ns, name)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            if limits.get(GPU) != "1":
                raise RuntimeError(f"latency run {i}: the patch is not visible ({limits})")
            before = [(s, e) for _v, _r, s, e in kube.calls if e <= patched]
            effect.append(patched - started)
            answer.append(answered - started)
            api_share.append(sum(e - s for s, e in before) / (patched - started))
            api_calls += len(before)
    finally:
        kube.close()
        confirm_api = getattr(service.engine.confirm, "api", None)  # its kept-alive connections
        if confirm_api is not None:
            confirm_api.close()
        log.removeHandler(handler)
        handler.close()
        log.level, log.propagate = saved
    n = len(effect)
    confirm_s = metrics.registry.get_sample_value("reactor_confirm_duration_seconds_sum") or 0.0
    confirm_n = metrics.registry.get_sample_value("reactor_confirm_duration_seconds_count") or 0.0
    return {
        # The confirm step (one request to Prometheus's rule API per notification) is part of the time to effect:
        # said apart, so it hides in no other figure.
        "confirm_requests_per_run": round(confirm_n / n, 2) if n else 0,
        "confirm_ms_mean": round(confirm_s / confirm_n * 1e3, 2) if confirm_n else 0,
        "runs": n, "api_calls_to_effect": round(api_calls / n, 2) if n else 0,
        "effect_p50_ms": round(_quantile(effect, 0.5) * 1e3, 2), "effect_p99_ms": round(_quantile(effect, 0.99) * 1e3, 2),
        "answer_p50_ms": round(_quantile(answer, 0.5) * 1e3, 2), "answer_p99_ms": round(_quantile(answer, 0.99) * 1e3, 2),
        "api_share_p50": round(_quantile(api_share, 0.5), 3),
        "api_share_mean": round(sum(api_share) / n, 3) if n else 0,
    }
