"""The CPU-starved flow against the oldest and the newest releases the embedded cluster plays (issue 25).

A v1.28 server serves no pods/resize (in-place resize is KEP-1287, on by default from v1.33). There
`cpu.applyTo: pods` is refused by name (`in-place-unavailable`) before anything is written, `both` goes to
the template alone, and a 404 from the subresource is never "pod gone"; at 1.33+ the same alert is applied in
place. `reactor plan` says what the webhook would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor.app.assembly import plan_engine
from reactor.cluster.kube import Capabilities
from reactor.tools.plan import run_plan
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.engine.test_cpu_flow import alerts, pod_state, template, world
from tests.support import NAMESPACE, reactor_for

OLDEST, NEWEST_IN_PLACE = "1.28", ("1.33", "1.35")


def played(version: str, **gates: bool) -> SimCluster:
    return build.start(world("20"), kube_version=version, feature_gates=gates)


@pytest.fixture
def old() -> Iterator[SimCluster]:
    with played(OLDEST) as cluster:
        yield cluster


def annotations(sim: SimCluster) -> dict[str, str]:
    return sim.get("deployments", NAMESPACE, "trainer")["metadata"].get("annotations") or {}


@pytest.mark.parametrize("version", NEWEST_IN_PLACE)
def test_from_1_33_the_starved_container_is_resized_in_place(version: str, token_file: Path) -> None:
    sim = played(version)
    try:
        r = reactor_for(sim, token_file)
        before = pod_state(sim)
        outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
        assert {(o["result"], o["action"], o["to"]) for o in outcomes} == {("applied", "resize-cpu", "3000m")}
        sim.settle()
        after = pod_state(sim)
        assert set(after) == set(before) and {v for v in after.values()} == {("3", "3", "2", "3")}
        assert sim.requests[("patch", "pods", "resize")] == 2
    finally:
        sim.stop()


def test_at_1_28_apply_to_pods_is_refused_by_name_and_nothing_is_written(old: SimCluster, token_file: Path) -> None:
    r = reactor_for(old, token_file)
    before, recorded = pod_state(old), annotations(old)
    outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "in-place-unavailable")}
    (detail,) = {o["detail"] for o in outcomes}
    assert "v1.28.0" in detail and "serves no pods/resize" in detail
    assert r.metric("reactor_workload_skips_total", reason="in-place-unavailable") >= 1
    assert r.metric("reactor_actions_total", action="resize-cpu", result="applied", namespace=NAMESPACE) == 0
    old.settle()
    assert pod_state(old) == before and annotations(old) == recorded, "no state recorded for a raise never made"
    assert ("patch", "pods", "resize") not in old.requests
    assert not [e for e in old.list("events", NAMESPACE) if e.get("reason") == "CPUResized"]


def test_at_1_28_apply_to_both_goes_to_the_template_alone(old: SimCluster, token_file: Path) -> None:
    r = reactor_for(old, token_file, cpu={"applyTo": "both"})
    before = set(pod_state(old))
    outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {(o["result"], o["action"], o["to"]) for o in outcomes} == {("applied", "resize-cpu", "3000m")}
    assert template(old)["limits"]["cpu"] == "3"
    assert ("patch", "pods", "resize") not in old.requests, "no write the server does not serve"
    (event,) = [e for e in old.list("events", NAMESPACE) if e.get("reason") == "CPUResized"]
    assert "resized in place" not in event["message"]
    old.settle()
    assert not set(pod_state(old)) & before, "the rollout replaced the pods"


def test_a_404_from_an_unserved_resize_is_never_a_pod_gone(old: SimCluster, token_file: Path) -> None:
    """The capabilities say pods/resize is served (remembered from before a downgrade): the 404 for a pod that is
    there fails the change with the reason, never `applied`, never "gone"; the server is asked again."""
    r = reactor_for(old, token_file)
    kube = r.service.kube
    kube._capabilities = Capabilities(git_version="v1.33.0", major=1, minor=33, core=frozenset({"pods/resize"}),
                                      known=True)
    outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("failed", "api-error")}
    (detail,) = {o["detail"] for o in outcomes}
    assert "serves no pods/resize" in detail and "gone" not in detail
    assert not [e for e in old.list("events", NAMESPACE) if e.get("reason") == "CPUResized"]
    assert kube.capabilities().git_version == "v1.28.0", "asked again after the 404"
    second = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
    assert {o.get("reason") for o in second} <= {"in-place-unavailable", "cooldown", "already-applied"}


def test_plan_says_what_the_webhook_would(old: SimCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           token_file: Path) -> None:
    r = reactor_for(old, token_file)
    notification = tmp_path / "alerts.json"
    notification.write_text(json.dumps(alerts(r, "GPUStarvedByCPU", "0.500")))
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"namespaces: {{allow: [{NAMESPACE}]}}\n")
    kubeconfig = old.write_kubeconfig(tmp_path / "kubeconfig")
    assert run_plan(alerts=str(notification), config=str(policy), kubeconfig=kubeconfig, seeds=None,
                    build=plan_engine, output="json") == 0
    outcomes = json.loads(capsys.readouterr().out)["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "in-place-unavailable")}


@pytest.mark.parametrize("version", (OLDEST, *NEWEST_IN_PLACE))
def test_memory_near_its_limit_on_each_release(version: str, token_file: Path) -> None:
    """The memory action follows the same rule: in place from 1.33, refused by name at 1.28 (nothing written)."""
    from tests.engine import test_memory_flow as memory

    sim = build.start(memory.world(), kube_version=version)
    try:
        r = reactor_for(sim, token_file)
        before, recorded = memory.pod_state(sim), annotations(sim)
        got = memory.outcomes(r, memory.alerts(r))
        if version == OLDEST:
            assert got == {("skipped", "", "", "in-place-unavailable")}
            assert memory.pod_state(sim) == before and annotations(sim) == recorded
            assert ("patch", "pods", "resize") not in sim.requests
        else:
            assert got == {("applied", "resize-memory", "8192Mi", "10240Mi")}
            sim.settle()
            assert set(memory.pod_state(sim)) == set(before), "the same pods, resized in place"
    finally:
        sim.stop()


def test_the_server_decides_not_the_calendar(token_file: Path) -> None:
    """v1.32 with InPlacePodVerticalScaling on serves pods/resize: resized in place, the kubelet's verdict read from
    `status.resize` and the raise verified once applied; v1.33 with it off serves none: refused by name."""
    sim = played("1.32", InPlacePodVerticalScaling=True)
    try:
        r = reactor_for(sim, token_file)
        before = pod_state(sim)
        outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
        assert {(o["result"], o["to"]) for o in outcomes} == {("applied", "3000m")}
        (event,) = [e for e in sim.list("events", NAMESPACE) if e.get("reason") == "CPUResized"]
        assert event["message"].count(": Proposed") == 2, event["message"]
        sim.settle()
        after = pod_state(sim)
        assert set(after) == set(before) and {v for v in after.values()} == {("3", "3", "2", "3")}
        assert all("resize" not in p["status"] for p in sim.list("pods", NAMESPACE))
    finally:
        sim.stop()
    off = played("1.33", InPlacePodVerticalScaling=False)
    try:
        r = reactor_for(off, token_file)
        outcomes = r.post(alerts(r, "GPUStarvedByCPU", "0.500")).get_json()["outcomes"]
        assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "in-place-unavailable")}
        assert {"(v1.33.0) serves no pods/resize" in o["detail"] for o in outcomes} == {True}
    finally:
        off.stop()
