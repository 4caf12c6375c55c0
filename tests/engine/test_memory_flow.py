"""The memory action of the CPU half over real HTTP against the embedded cluster: a GPU container near its
memory limit gets memory, in place, and keeps its GPUs; the requests.memory/limits.memory quota and the
LimitRange bound the raise; a container whose resizePolicy restarts it for memory gets it through its
template; the resolve reverts."""

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

GI = 1 << 30
ALERT = "GPUContainerNearMemoryLimit"


def trainer(name: str = "trainer", *, restart: str = "NotRequired") -> build.Obj:
    """2 pods × (2 GPUs, 2 CPUs, 8 Gi), CPU resized in place and memory as `restart` says."""
    main = build.container(image=f"registry.example.com/{name}:3", gpus=2, cpu="2", memory="8Gi",
                           resize={"cpu": "NotRequired", "memory": restart})
    return build.deployment(name, main, replicas=2, labelled=True)


def world(quota: str = "64Gi", *, restart: str = "NotRequired") -> list[build.Obj]:
    """One 8-GPU node; a quota of 16 GPUs, 20 CPUs and `quota` of memory; the trainer."""
    hard = {f"requests.{build.GPU}": 16, "requests.cpu": 20, "limits.cpu": 20, "requests.memory": quota,
            "limits.memory": quota}
    return [build.namespace(), build.gpu_node(), build.quota("compute", hard), trainer(restart=restart)]


def start(quota: str = "64Gi", *, restart: str = "NotRequired", extra: tuple[build.Obj, ...] = ()) -> SimCluster:
    return build.start(world(quota, restart=restart), extra)


@pytest.fixture
def mem_sim() -> Iterator[SimCluster]:
    with start() as cluster:
        yield cluster


def alerts(r: Reactor, *, status: str = "firing") -> dict[str, Any]:
    specs = [AlertSpec(ALERT, NAMESPACE, pod, "main", 0.95, 2, status=status) for pod in r.pods("trainer")]
    return notification(specs)


def resolved(firing: dict[str, Any]) -> dict[str, Any]:
    for alert in firing["alerts"]:
        alert["status"], alert["endsAt"] = "resolved", alert["startsAt"]
    firing["status"] = "resolved"
    return firing


def pod_state(sim: SimCluster) -> dict[str, tuple[str, str, str, str, str]]:
    """uid → (memory request, memory limit, GPUs, cpu limit, memory the kubelet reports applied) of each pod."""
    found = {}
    for pod in sim.list("pods", NAMESPACE, label_selector="app=trainer"):
        res = pod["spec"]["containers"][0]["resources"]
        applied = ((pod["status"].get("containerStatuses") or [{}])[0].get("resources") or {}).get("limits", {})
        found[pod["metadata"]["uid"]] = (res["requests"]["memory"], res["limits"]["memory"],
                                         res["limits"]["nvidia.com/gpu"], res["limits"]["cpu"], applied.get("memory", ""))
    return found


def template(sim: SimCluster) -> dict[str, Any]:
    return sim.get("deployments", NAMESPACE, "trainer")["spec"]["template"]["spec"]["containers"][0]["resources"]


def outcomes(r: Reactor, body: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {(o["result"], o.get("action") or "", o.get("from") or "", o.get("to") or o.get("reason") or "")
            for o in r.post(body).get_json()["outcomes"]}


def test_a_container_near_its_memory_limit_gets_memory_in_place_and_keeps_its_gpus(
        mem_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(mem_sim, token_file)
    before = pod_state(mem_sim)
    assert outcomes(r, alerts(r)) == {("applied", "resize-memory", "8192Mi", "10240Mi")}  # 8Gi × 1.25
    assert r.metric("reactor_actions_total", action="resize-memory", result="applied", namespace=NAMESPACE) == 1
    assert r.metric("reactor_gpus_changed_total", direction="released", namespace=NAMESPACE) == 0
    mem_sim.settle()
    after = pod_state(mem_sim)
    assert set(after) == set(before), "same pods: resized in place, not replaced"
    assert set(after.values()) == {("10Gi", "10Gi", "2", "2", "10Gi")}, "GPUs and CPU untouched, memory applied"
    assert template(mem_sim)["limits"] == {"nvidia.com/gpu": "2", "cpu": "2", "memory": "8Gi"}, "pods only"
    meta = mem_sim.get("deployments", NAMESPACE, "trainer")["metadata"]
    assert json.loads(meta["annotations"][ORIGINAL]) == {"memory": {"main": {"request": 8 * GI, "limit": 8 * GI}}}
    (event,) = [e for e in mem_sim.list("events", NAMESPACE) if e.get("reason") == "MemoryResized"]
    assert "resized in place" in event["message"]
    assert {k: v for k, v in mem_sim.requests.items() if k[0] == "patch"}[("patch", "pods", "resize")] == 2
    quota = mem_sim.get("resourcequotas", NAMESPACE, "compute")
    assert quota["status"]["used"]["limits.memory"] == "20Gi"


def test_the_memory_quota_bounds_the_raise(token_file: Path) -> None:
    """2 pods × 8Gi use 16Gi of 19Gi: raising both by 2Gi needs 4Gi."""
    sim = start("19Gi")
    try:
        r = reactor_for(sim, token_file)
        found = r.post(alerts(r)).get_json()["outcomes"]
        assert {o["reason"] for o in found} == {"quota-exceeded"}
        assert "requests.memory" in found[0]["detail"] or "limits.memory" in found[0]["detail"]
        assert {v[:2] for v in pod_state(sim).values()} == {("8Gi", "8Gi")}
        assert ("patch", "pods", "resize") not in sim.requests
    finally:
        sim.stop()


def test_the_limitrange_max_caps_the_raise(token_file: Path) -> None:
    limit_range = build.limit_range("bounds", {"type": "Container", "max": {"memory": "9Gi"},
                                               "maxLimitRequestRatio": {"memory": "2"}})
    sim = start(extra=(limit_range,))
    try:
        r = reactor_for(sim, token_file)
        assert outcomes(r, alerts(r)) == {("applied", "resize-memory", "8192Mi", "9216Mi")}
        sim.settle()
        assert {v[:2] for v in pod_state(sim).values()} == {("9Gi", "9Gi")}
        again = r.post(alerts(r)).get_json()["outcomes"]
        assert {o["result"] for o in again} == {"skipped"}  # at the LimitRange max now (or cooling down)
    finally:
        sim.stop()


def test_the_resolve_restores_the_memory_in_place(mem_sim: SimCluster, token_file: Path) -> None:
    r = reactor_for(mem_sim, token_file, revert=["resize-memory-up"], revertAfter="0s")
    firing = alerts(r)
    assert r.post(firing).status_code == 200
    mem_sim.settle()
    uids = set(pod_state(mem_sim))
    assert outcomes(r, resolved(firing)) == {("applied", "revert", "10240Mi", "8192Mi")}
    mem_sim.settle()
    after = pod_state(mem_sim)
    assert set(after) == uids and set(after.values()) == {("8Gi", "8Gi", "2", "2", "8Gi")}
    meta = mem_sim.get("deployments", NAMESPACE, "trainer")["metadata"]
    assert ORIGINAL not in (meta.get("annotations") or {})


def test_a_container_restarted_by_a_memory_resize_gets_it_through_its_template(token_file: Path) -> None:
    """resizePolicy RestartContainer for memory: an in-place resize would restart it, so the template changes."""
    sim = start(restart="RestartContainer")
    try:
        r = reactor_for(sim, token_file)
        before = set(pod_state(sim))
        assert outcomes(r, alerts(r)) == {("applied", "resize-memory", "8192Mi", "10240Mi")}
        assert template(sim)["limits"]["memory"] == "10Gi" and template(sim)["requests"]["memory"] == "10Gi"
        assert template(sim)["limits"]["nvidia.com/gpu"] == "2"
        assert ("patch", "pods", "resize") not in sim.requests
        sim.settle()
        after = pod_state(sim)
        assert not set(after) & before, "a template change replaces every pod"
        assert {v[:3] for v in after.values()} == {("10Gi", "10Gi", "2")}
    finally:
        sim.stop()


def test_memory_a_raise_takes_is_reserved_for_the_rest_of_the_notification(token_file: Path) -> None:
    """Two near-limit trainers in one notification, headroom for one raise (2 pods × 2Gi of 36Gi, 32Gi used): the
    first is raised, the second refused by the policy (not by a 403 from the API server on its resizes)."""
    sim = start("36Gi", extra=(trainer("trainer-b"),))
    try:
        r = reactor_for(sim, token_file)
        specs = [AlertSpec(ALERT, NAMESPACE, pod, "main", 0.95, 2) for app in ("trainer", "trainer-b")
                 for pod in r.pods(app)]
        found = {o["workload"].rsplit("/", 1)[-1]: o for o in r.post(notification(specs)).get_json()["outcomes"]}
        assert {name: (o["result"], o.get("reason")) for name, o in found.items()} == {
            "trainer": ("applied", None), "trainer-b": ("skipped", "quota-exceeded")}
        assert "headroom 0B" in found["trainer-b"]["detail"]
        assert sim.requests[("patch", "pods", "resize")] == 2, "only the first trainer's pods were resized"
    finally:
        sim.stop()
