"""What the bench's figures rest on, pinned as request counts (never times): reads shared per
notification, pods resolved once across notifications, and no namespace reads on a refusal."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reactor.core.model import WorkloadRef
from reactor.resolve.owners import Owner, Owners
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

START = datetime.now(UTC) - timedelta(minutes=5)


def _firing(reactor: Reactor, minutes: int) -> dict[str, object]:
    return reactor.alerts("GPUUnderutilized", "llm-inference", "server", value=0.1, gpus=4,
                          starts_at=START + timedelta(minutes=minutes))


def test_a_new_firing_on_a_workload_in_cooldown_reads_only_the_workload(reactor: Reactor) -> None:
    first = reactor.post(_firing(reactor, 0)).get_json()["outcomes"]
    assert {o["result"] for o in first} == {"applied"}
    reactor.sim.reset_counters()
    again = reactor.post(_firing(reactor, 1)).get_json()["outcomes"]
    assert {o["reason"] for o in again} == {"cooldown"}
    # No pod, ReplicaSet, LimitRange, ResourceQuota or PriorityClass read: the pods' owner is
    # remembered, and the cooldown rail refuses before the namespace is read.
    assert reactor.sim.requests == Counter({("get", "deployments", ""): 1})


def test_a_remembered_owner_that_is_gone_is_resolved_afresh(reactor: Reactor) -> None:
    assert reactor.post(_firing(reactor, 0)).status_code == 200
    body = _firing(reactor, 1)
    reactor.sim.delete("deployments", NAMESPACE, "llm-inference")  # its ReplicaSet and pods go with it
    reactor.sim.reset_counters()
    outcomes = reactor.post(body).get_json()["outcomes"]
    assert len(outcomes) == 3
    assert reactor.sim.requests[("get", "deployments", "")] == 1  # read once, shared by the notification
    assert reactor.sim.requests[("get", "pods", "")] == 3  # the chain walked again from each pod
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "not-found")}


def test_owners_expire_and_stay_bounded() -> None:
    now = [0.0]
    owners = Owners(size=2, ttl=60, clock=lambda: now[0])
    ref = WorkloadRef("Deployment", "ns", "web")
    for pod in ("a", "b", "c"):
        owners.put("ns", pod, Owner(ref, {}))
    assert owners.get("ns", "a") is None  # the oldest went when the third came
    assert owners.get("ns", "c") == (ref, None)
    now[0] = 61
    assert owners.get("ns", "c") is None


def test_priority_classes_are_listed_only_when_a_set_priority_strategy_is_reached(
        reactor: Reactor, sim: SimCluster, token_file: Path) -> None:
    resize = reactor.post(_firing(reactor, 0)).get_json()["outcomes"]
    assert {o["action"] for o in resize} == {"resize-gpu"}  # resize-gpu-down applies before set-priority-down
    assert ("list", "priorityclasses", "") not in sim.requests
    priority_only = build_reactor(sim, make_settings(token_file, alerts={"GPUUnderutilized": ["set-priority-down"]}))
    sim.reset_counters()
    body = priority_only.alerts("GPUUnderutilized", "trainer", "trainer", value=0.1, gpus=2, starts_at=START)
    outcomes = priority_only.post(body).get_json()["outcomes"]
    assert {o.get("considered", [{}])[0].get("strategy") for o in outcomes} == {"set-priority-down"}
    # The trainer sits at the ladder's bottom: the strategy stops there before it needs to know the classes.
    assert {o["reason"] for o in outcomes} == {"priority-at-end"}
    assert ("list", "priorityclasses", "") not in sim.requests
    trainer = sim.get("statefulsets", "ml-workloads", "trainer")
    trainer["spec"]["template"]["spec"]["priorityClassName"] = "high-priority-gpu"
    sim.apply(trainer)
    sim.settle()
    sim.reset_counters()
    outcomes = priority_only.post(body).get_json()["outcomes"]
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "set-priority")}
    assert sim.requests[("list", "priorityclasses", "")] == 1  # asked once, when the class to move to is checked
