"""Verification latency: from the reactor's write until its verifier marks the rollout `verified`.

Method: the reactor is assembled in the bench process as `reactor serve` assembles it (watch cache on,
the verifier Lease in `gpu-reactor`), and fed one-alert notifications through the Flask test client, each
on a Deployment of its own (1 replica, 2 GPUs → 1). The embedded cluster's controllers run in the
background (a round every `CONTROLLER_ROUND` s: Deployment → ReplicaSet → scheduler → kubelet, as a
cluster's controllers run), so each change rolls out by itself. Verifier passes run back to back (one
every `PASS` s) instead of every `verify.interval` (15 s by default), so what is measured is the rollout
and the verifier's detection, not the polling period: a deployment's figure adds up to one interval.
Per run: `rolled out` = from the write until the Deployment's status says complete (read from the API
server by the bench), `verified` = until the `verified` mark is on the Deployment. It runs before the
bench starts its `reactor serve` (whose storm leaves rollouts pending), with a Lease of its own.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from bench.loadgen import quantile
from bench.scenario import CONTAINER, LATENCY_NAMESPACES, POLICY, confirm, deployment, prometheus
from reactor.app.assembly import assemble
from reactor.cluster.kube import KubeGateway
from reactor.cluster.rollout import progress
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.state.annotations import VERIFICATION
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster

CONTROLLER_ROUND = 0.02
PASS = 0.01
RUN_TIMEOUT = 30.0
LEASE = "bench-verify-latency"  # not the reactor's: this in-process reactor is a deployment of its own


def verify_workload(i: int) -> tuple[str, str]:
    return LATENCY_NAMESPACES[i % len(LATENCY_NAMESPACES)], f"verify-{i:03d}"


def _verification(obj: dict[str, Any]) -> str:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(VERIFICATION)
    return str(json.loads(raw).get("result", "")) if raw else ""


def run_verify_latency(sim: SimCluster, tmp: Path, token: str, runs: int = 20) -> dict[str, Any]:
    sim.apply([deployment(*verify_workload(i), 1, 2) for i in range(runs)])
    sim.settle()
    (tmp / "verify-token").write_text(token)
    doc = dict(POLICY, server={**POLICY["server"], "tokenFile": str(tmp / "verify-token")},
               state={"keyFile": str(state_key_file(tmp))}, verify={"leaseName": LEASE})
    settings = build_settings({**doc, "confirm": confirm()}, {})
    metrics = Metrics(CollectorRegistry())
    kube = KubeGateway.for_url(sim.url, settings.kube, metrics)
    service = assemble(settings, kube=kube, metrics=metrics)
    informers, verifier = service.informers, service.verifier
    assert informers is not None and verifier is not None, "the bench policy runs the watch cache and the verifier"
    # The reactor's logs (decisions, the informers' ends) into a file, as in the latency run.
    log = logging.getLogger("reactor")
    handler = logging.FileHandler(tmp / "verify-latency.log")
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    informers.start()
    halt = None
    rolled: list[float] = []
    verified: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while informers.unsynced():
            if time.monotonic() > deadline:
                raise RuntimeError(f"verify latency: the cache did not sync: {informers.unsynced()[:3]}")
            time.sleep(0.05)
        client = service.app.test_client()
        halt = sim.run_controllers(CONTROLLER_ROUND)
        for i in range(runs):
            ns, name = verify_workload(i)
            pod = sim.list("pods", ns, label_selector=f"app={name}")[0]["metadata"]["name"]
            body = notification([AlertSpec("GPUUnderutilized", ns, pod, CONTAINER, 0.1, 2)])
            prometheus().observe(body)  # a genuine alert: the rules fire it
            response = client.post("/alerts", json=body, headers={"Authorization": f"Bearer {token}"})
            written = time.perf_counter()
            outcome = response.get_json()["outcomes"][0]
            if response.status_code != 200 or outcome["result"] != "applied":
                raise RuntimeError(f"verify latency run {i}: {response.status_code} {outcome}")
            rolled_at = verified_at = None
            while verified_at is None:
                now = time.perf_counter()
                if now - written > RUN_TIMEOUT:
                    raise RuntimeError(f"verify latency run {i}: not verified within {RUN_TIMEOUT} s")
                verifier.check_all()
                obj = sim.get("deployments", ns, name)
                now = time.perf_counter()
                if rolled_at is None and progress(obj, "Deployment").done:
                    rolled_at = now
                if _verification(obj) == "verified":
                    verified_at = now
                    rolled_at = rolled_at or now
                time.sleep(PASS)
            rolled.append(rolled_at - written)
            verified.append(verified_at - written)
    finally:
        if halt is not None:
            halt()
            sim.settle()  # what the last round left (old ReplicaSets scaled down), before the next step
        informers.stop(timeout=5)
        kube.close()
        confirm_api = getattr(service.engine.confirm, "api", None)  # its kept-alive connections
        if confirm_api is not None:
            confirm_api.close()
        log.removeHandler(handler)
        handler.close()
        log.level, log.propagate = saved
    rolled.sort()
    verified.sort()
    detect = sorted(v - r for v, r in zip(verified, rolled, strict=True))
    return {"runs": len(verified), "controller_round_s": CONTROLLER_ROUND, "pass_s": PASS,
            "default_interval_s": settings.policy.verify_interval.total_seconds(),
            "rolled_out_p50_ms": round(quantile(rolled, 0.5) * 1e3, 1),
            "rolled_out_p99_ms": round(quantile(rolled, 0.99) * 1e3, 1),
            "verified_p50_ms": round(quantile(verified, 0.5) * 1e3, 1),
            "verified_p99_ms": round(quantile(verified, 0.99) * 1e3, 1),
            "detect_p50_ms": round(quantile(detect, 0.5) * 1e3, 1),
            "detect_p99_ms": round(quantile(detect, 0.99) * 1e3, 1)}
