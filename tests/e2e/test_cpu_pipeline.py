"""End to end, the CPU half: cAdvisor's CFS counters and dcgm-exporter's utilization → Prometheus rules →
Alertmanager → `reactor serve` → the pod's CPU raised in place (pods/resize), its GPUs untouched.

The fake cAdvisor (tests/promstack/cadvisor.py) is scraped beside the fake dcgm-exporter, as a kubelet
target; every running GPU container is measured, the loader's throttled in 60% of its CFS periods.
Runs before tests/e2e/test_pipeline.py (file order) on its own workload, so it touches nothing of theirs.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.pipeline import NAMESPACE, Pipeline, alerts_in, gpus, last_action, outcomes_for

pytestmark = pytest.mark.promstack

TIMEOUT = 60.0
LOADER = "loader"


def _loader_pod(p: Pipeline) -> dict[str, Any]:
    (pod,) = [o for o in p.sim.list("pods", NAMESPACE, label_selector=f"app={LOADER}")
              if not o["metadata"].get("deletionTimestamp")]
    return pod


def _cpu(pod: dict[str, Any]) -> tuple[str, str]:
    resources = pod["spec"]["containers"][0]["resources"]
    return resources["requests"]["cpu"], resources["limits"]["cpu"]


def test_a_gpu_starved_by_its_cpu_gets_cpu_in_place(e2e_pipeline: Pipeline) -> None:
    p = e2e_pipeline
    before = _loader_pod(p)
    uid, name = before["metadata"]["uid"], before["metadata"]["name"]
    assert _cpu(before) == ("2", "2")
    p.mirror.when(lambda: _cpu(_loader_pod(p)) != ("2", "2"), lambda: (
        p.mirror.set_throttling(LOADER, 0.0), p.mirror.set_demand(LOADER, "deployments", LOADER, 0.5)))
    changed = time.monotonic()
    p.mirror.set_demand(LOADER, "deployments", LOADER, 0.10)  # its GPU waits: 10% busy
    p.mirror.set_throttling(LOADER, 0.60)  # its CPU throttled in 60% of its CFS periods

    raised = p.wait(lambda: _cpu(_loader_pod(p)) != ("2", "2") or None, timeout=TIMEOUT,
                    what="the loader pod's CPU raised in place")
    took = time.monotonic() - changed
    after = _loader_pod(p)
    assert raised and after["metadata"]["uid"] == uid, "the same pod: resized, not replaced"
    assert _cpu(after) == ("3250m", "3250m")  # 2 cores × (1 + 0.6), rounded up to the 250m step
    deployment = p.workload("deployments", LOADER)
    assert gpus(deployment, LOADER) == ("1", "1"), "its GPUs untouched"
    template_compute = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    assert template_compute == "2", "cpu.applyTo: pods (the default) leaves the template alone"
    last = last_action(deployment)
    assert last is not None and (last["action"], last["from"], last["to"], last["alert"]) == (
        "resize-cpu", "2000m", "3250m", "GPUStarvedByCPU")

    starved = p.delivery(lambda d: any(o["result"] == "applied"
                                       for o in outcomes_for(d, "GPUStarvedByCPU", "firing", [name])),
                         timeout=10, what="the answer applying GPUStarvedByCPU")
    (alert,) = alerts_in(starved, "GPUStarvedByCPU", "firing", [name])
    assert 0.5 <= float(alert["annotations"]["cpu_throttling"]) <= 0.7
    assert float(alert["annotations"]["value"]) < 0.30
    # The GPUUnderutilized that fired beside it, where it reached the reactor, shrank nothing: up to the delivery that
    # raised the CPU it is refused as CPU-bound; Alertmanager may deliver it again after that raise (its own group's
    # timing), and then the workload's cooldown, started by the raise, refuses it first (policy/rails.py order).
    deliveries = list(p.sink.deliveries)
    raised_at = next(i for i, d in enumerate(deliveries) if d is starved)
    for i, delivery in enumerate(deliveries):
        for outcome in outcomes_for(delivery, "GPUUnderutilized", "firing", [name]):
            allowed = ("cpu-bound",) if i <= raised_at else ("cpu-bound", "cooldown")
            assert outcome["result"] == "skipped" and outcome["reason"] in allowed, (i, raised_at, outcome)
    print(f"\nCPU half: throttled -> CPU raised in place in {took:.1f} s")
