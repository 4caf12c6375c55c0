"""The CPU half over real HTTP against the embedded cluster: a GPU starved by its CPU gets CPU, in place,
and keeps its GPUs; a throttled container's GPUUnderutilized is refused as cpu-bound; the resolve reverts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.state.annotations import ORIGINAL
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, Reactor, reactor_for


def world(cores: str) -> list[build.Obj]:
    """One 8-GPU node; a quota of 16 GPUs and `cores` CPUs; the trainer, 2 pods × (2 GPUs, 2 CPUs, 8 Gi), whose CPU
    is resized in place."""
    return [build.namespace(), build.gpu_node(),
            build.quota("compute", {f"requests.{build.GPU}": 16, "requests.cpu": cores, "limits.cpu": cores}),
            build.deployment("trainer", build.container(gpus=2, cpu="2", memory="8Gi", resize={"cpu": "NotRequired"}),
                             replicas=2, labelled=True)]


def start(cores: str) -> SimCluster:
    return build.start(world(cores))


@pytest.fixture
def cpu_sim() -> Iterator[SimCluster]:
    with start("20") as cluster:
        yield cluster


def alerts(r: Reactor, name: str, throttling: str, *, status: str = "firing", value: float = 0.2) -> dict[str, Any]:
    specs = [AlertSpec(name, NAMESPACE, pod, "main", value, 2, status=status,
                       extra_annotations={"cpu_throttling": throttling}) for pod in r.pods("trainer")]
    return notification(specs)


def pod_state(sim: SimCluster) -> dict[str, tuple[str, str, str, str]]:
    """uid → (cpu request, cpu limit, GPUs, cpu the kubelet reports applied) of each trainer pod."""
    found = {}
    for pod in sim.list("pods", NAMESPACE, label_selector="app=trainer"):
        res = pod["spec"]["containers"][0]["resources"]
        applied = ((pod["status"].get("containerStatuses") or [{}])[0].get("resources") or {}).get("limits", {})
        found[pod["metadata"]["uid"]] = (res["requests"]["cpu"], res["limits"]["cpu"], res["limits"]["nvidia.com/gpu"],
                                         applied.get("cpu", ""))
    return found


def template(sim: SimCluster) -> dict[str, Any]:
    return sim.get("deployments", NAMESPACE, "trainer")["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_a_starved_container_gets_cpu_in_place_and_keeps_its_gpus(cpu_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(cpu_sim, token_file)
    before = pod_state(cpu_sim)
    counted = {"action": "resize-cpu", "result": "applied", "namespace": NAMESPACE}
    outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {(o["result"], o["action"], o["from"], o["to"]) for o in outcomes} == {
        ("applied", "resize-cpu", "2000m", "3000m")}
    assert r.metric("reactor_actions_total", **counted) == 1
    assert r.metric("reactor_gpus_changed_total", direction="released", namespace=NAMESPACE) == 0
    cpu_sim.settle()
    after = pod_state(cpu_sim)
    assert set(after) == set(before), "same pods: resized in place, not replaced"
    assert {v[:3] for v in after.values()} == {("3", "3", "2")}
    assert {v[3] for v in after.values()} == {"3"}, "the kubelet applied it"
    assert template(cpu_sim)["limits"] == {"nvidia.com/gpu": "2", "cpu": "2", "memory": "8Gi"}, "pods only"
    meta = cpu_sim.get("deployments", NAMESPACE, "trainer")["metadata"]
    assert json.loads(meta["annotations"][ORIGINAL]) == {"cpu": {"main": {"request": 2000, "limit": 2000}}}
    (event,) = [e for e in cpu_sim.list("events", NAMESPACE) if e.get("reason") == "CPUResized"]
    # Read back at once: the kubelet has not looked at it yet (it applies it on its next sync, below).
    assert "resized in place" in event["message"] and ": Proposed" in event["message"]
    resizes = {k: v for k, v in cpu_sim.requests.items() if k[0] == "patch"}
    assert resizes[("patch", "pods", "resize")] == 2


def test_a_throttled_container_is_not_shrunk(cpu_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(cpu_sim, token_file)
    before = pod_state(cpu_sim)
    outcomes = r.post(alerts(r, "GPUUnderutilized", "0.600")).get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "cpu-bound")}
    assert template(cpu_sim)["limits"]["nvidia.com/gpu"] == "2"
    assert pod_state(cpu_sim) == before
    assert r.metric("reactor_workload_skips_total", reason="cpu-bound") >= 1


def test_unknown_throttling_holds_but_a_measured_calm_cpu_lets_it_shrink(cpu_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(cpu_sim, token_file)
    held = r.post(alerts(r, "GPUUnderutilized", "unknown")).get_json()["outcomes"]
    assert {o["reason"] for o in held} == {"cpu-bound"}
    shrunk = r.post(alerts(r, "GPUUnderutilized", "0.020")).get_json()["outcomes"]
    assert {(o["result"], o["action"]) for o in shrunk} == {("applied", "resize-gpu")}
    assert template(cpu_sim)["limits"]["nvidia.com/gpu"] == "1"


def test_the_resolve_restores_the_cpu_in_place(cpu_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(cpu_sim, token_file, revert=["resize-cpu-up"], revertAfter="0s")
    firing = alerts(r, "GPUStarvedByCPU", "0.500")
    assert r.post(firing).status_code == 200
    cpu_sim.settle()
    uids = set(pod_state(cpu_sim))
    for alert in firing["alerts"]:
        alert["status"], alert["endsAt"] = "resolved", alert["startsAt"]
    firing["status"] = "resolved"
    outcomes = r.post(firing).get_json()["outcomes"]
    assert {(o["result"], o["action"], o["from"], o["to"]) for o in outcomes} == {
        ("applied", "revert", "3000m", "2000m")}
    cpu_sim.settle()
    after = pod_state(cpu_sim)
    assert set(after) == uids and {v for v in after.values()} == {("2", "2", "2", "2")}
    meta = cpu_sim.get("deployments", NAMESPACE, "trainer")["metadata"]
    assert ORIGINAL not in (meta.get("annotations") or {})


def test_the_cpu_quota_bounds_the_raise(token_file: Path) -> None:
    """2 pods × 2 cores use 4 of 5: raising both by 1 core needs 2."""
    sim = start("5")
    try:
        r = reactor_for(sim, token_file)
        outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
        assert {o["reason"] for o in outcomes} == {"quota-exceeded"}
        assert {v[:2] for v in pod_state(sim).values()} == {("2", "2")}
    finally:
        sim.stop()


def test_apply_to_template_rolls_the_pods(cpu_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(cpu_sim, token_file, cpu={"applyTo": "template"})
    before = set(pod_state(cpu_sim))
    outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {(o["result"], o["to"]) for o in outcomes} == {("applied", "3000m")}
    assert template(cpu_sim)["limits"]["cpu"] == "3" and template(cpu_sim)["requests"]["cpu"] == "3"
    assert ("patch", "pods", "resize") not in cpu_sim.requests
    cpu_sim.settle()
    after = pod_state(cpu_sim)
    assert not set(after) & before, "a template change replaces every pod"
