"""Verify after acting, over HTTP against the embedded cluster (issue 14 part B): a change whose rollout
stalls is reverted after `verify.timeout`, a rollout that completes is marked verified, one replica verifies
at a time (the Lease), a restart resumes from the Lease and the sealed annotations, and a reverted change is
not tried again within `verify.revertWindow`. The verifier's clock is injected; passes are run by hand."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.app.assembly import verifier_lease
from reactor.cluster.cache import Store
from reactor.observe.verifier import Verifier
from reactor.state.annotations import VERIFICATION
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.cluster_builder import container, deployment, gpu_node, namespace, quota, start
from tests.support import NAMESPACE, Reactor, build_reactor, eventually, make_settings

GPU = "nvidia.com/gpu"
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = START + timedelta(seconds=seconds)


def _trainer(replicas: int = 1, gpus: int = 2, name: str = "trainer") -> dict[str, Any]:
    return deployment(name, container(image="trainer:1", gpus=gpus), replicas=replicas,
                      priority="medium-priority-gpu")


def _cluster(node_gpus: int, names: tuple[str, ...] = ("trainer",)) -> SimCluster:
    return start(namespace(), namespace("gpu-reactor"), gpu_node(gpus=node_gpus), [_trainer(name=n) for n in names],
                 priority_classes=True)


@pytest.fixture
def small() -> Iterator[SimCluster]:
    """One 4-GPU Node holding the trainer's one 2-GPU pod: a grow to 3 GPUs per pod fits on no Node beside it."""
    with _cluster(4) as sim:
        yield sim


@pytest.fixture
def roomy() -> Iterator[SimCluster]:
    with _cluster(8) as sim:
        yield sim


Build = Callable[..., Reactor]


def verifying_reactor(sim: SimCluster, token_file: Path, clock: Clock, identity: str,
                      kube: dict[str, Any]) -> Reactor:
    """A replica that grows GPUSaturated workloads and verifies every second (timeout 30 s), holding the verifier
    Lease as `identity`."""
    settings = make_settings(token_file, alerts={"GPUSaturated": ["resize-gpu-up"]}, cooldown="0s",
                             verify={"timeout": "30s", "interval": "1s"}, kube=kube)
    r = build_reactor(sim, settings, clock=clock)
    assert r.service.verifier is not None
    r.service.verifier.lease = verifier_lease(settings, r.service.kube, identity)
    return r


@pytest.fixture
def build(token_file: Path) -> Iterator[Build]:
    made: list[Reactor] = []

    def make(sim: SimCluster, clock: Clock, identity: str = "replica-a", **kube: Any) -> Reactor:
        r = verifying_reactor(sim, token_file, clock, identity, {"timeout": "2s", "qps": 1000, "burst": 1000, **kube})
        _flushing(r)
        made.append(r)
        return r

    yield make
    for r in made:
        if r.service.informers is not None:
            r.service.informers.stop(timeout=5)
        r.service.kube.close()


def _flushing(r: Reactor) -> None:
    """Each pass returns once the Events it queued were sent (they go out on a background thread)."""
    verifier = _verifier(r)
    one_pass = verifier.check_all

    def check_all() -> int:
        followed = one_pass()
        r.flush_events()
        return followed

    verifier.check_all = check_all  # type: ignore[method-assign]


def _verifier(r: Reactor) -> Verifier:
    assert r.service.verifier is not None
    return r.service.verifier


def _grow(r: Reactor) -> dict[str, Any]:
    (outcome,) = {o["workload"]: o for o in r.post(r.alerts("GPUSaturated", "trainer", "main",
                                                            value=0.98)).get_json()["outcomes"]}.values()
    return outcome


def _gpus(sim: SimCluster) -> str:
    return sim.get("deployments", NAMESPACE, "trainer")["spec"]["template"]["spec"]["containers"][0][
        "resources"]["limits"][GPU]


def _verification(sim: SimCluster) -> dict[str, Any]:
    raw = sim.get("deployments", NAMESPACE, "trainer")["metadata"]["annotations"][VERIFICATION]
    return json.loads(raw)


def _reasons(sim: SimCluster) -> list[str]:
    return [e["reason"] for e in sim.list("events", NAMESPACE)
            if e["involvedObject"]["name"] == "trainer" and e.get("source", {}).get("component") == "gpu-reactor"]


def _grown(sim: SimCluster, build: Build) -> tuple[Clock, Reactor]:
    """A reactor on its own clock that grew the trainer (2 → 3 GPUs per pod), the cluster settled after."""
    clock = Clock()
    r = build(sim, clock)
    assert _grow(r)["result"] == "applied"
    sim.settle()
    return clock, r


def test_a_grow_beyond_every_nodes_free_gpus_is_reverted_within_verify_timeout(small: SimCluster,
                                                                               build: Build) -> None:
    """The new 3-GPU pod stays Pending (FailedScheduling): before verify.timeout the change stands and stays
    pending; after it, a RolloutStalled Warning, the template back to 2 GPUs, `reverted` in the sealed state,
    an ActionReverted Event and reactor_verifications_total{result="reverted"}."""
    clock = Clock()
    r = build(small, clock)
    outcome = _grow(r)
    assert (outcome["result"], outcome["to"]) == ("applied", 3)
    small.settle()
    assert any(e["reason"] == "FailedScheduling" for e in small.list("events", NAMESPACE))
    clock.at(20)
    assert _verifier(r).check_all() == 1
    assert (_gpus(small), _verification(small)["result"]) == ("3", "pending")
    clock.at(31)
    _verifier(r).check_all()
    assert _gpus(small) == "2"
    verification = _verification(small)
    assert (verification["result"], verification["strategy"]) == ("reverted", "resize-gpu-up")
    assert "not ready (Pending or unschedulable)" in verification["reason"]
    assert sorted(_reasons(small)) == ["ActionReverted", "GPUResized", "RolloutStalled"]
    stalled = next(e for e in small.list("events", NAMESPACE) if e["reason"] == "RolloutStalled")
    assert stalled["type"] == "Warning"
    assert r.metric("reactor_verifications_total", result="reverted") == 1
    assert r.metric("reactor_gpus_added", namespace=NAMESPACE) == 0  # the revert gave the GPU back
    small.settle()
    assert _verifier(r).check_all() == 0  # nothing left to follow


def test_a_failed_create_rollout_is_reverted(roomy: SimCluster, build: Build) -> None:
    """A quota the reactor did not see at decision time (created after the write) makes the new ReplicaSet's
    pods FailedCreate: the Deployment's ReplicaFailure condition is the reason given for the revert."""
    clock = Clock()
    r = build(roomy, clock)
    assert _grow(r)["result"] == "applied"
    roomy.apply(quota("late", {f"requests.{GPU}": 2}))
    roomy.settle()
    assert any(e["reason"] == "FailedCreate" for e in roomy.list("events", NAMESPACE))
    clock.at(31)
    _verifier(r).check_all()
    verification = _verification(roomy)
    assert verification["result"] == "reverted", verification
    assert "ReplicaFailure FailedCreate" in verification["reason"]
    assert _gpus(roomy) == "2"


def test_a_successful_rollout_is_marked_verified(roomy: SimCluster, build: Build) -> None:
    clock, r = _grown(roomy, build)
    clock.at(5)
    _verifier(r).check_all()
    assert _verification(roomy)["result"] == "verified"
    assert _gpus(roomy) == "3"
    assert r.metric("reactor_verifications_total", result="verified") == 1
    assert r.metric("reactor_gpus_added", namespace=NAMESPACE) == 1  # 1 replica, 2 → 3 GPUs
    assert r.metric("reactor_gpus_released", namespace=NAMESPACE) == 0
    lease = roomy.get("leases", "gpu-reactor", "gpu-reactor-verifier")
    assert lease["spec"]["holderIdentity"] == "replica-a"
    assert json.loads(lease["metadata"]["annotations"]["gpu-reactor.io/verifying"]) == []


def test_two_replicas_verify_a_workload_once(small: SimCluster, build: Build) -> None:
    """Replica b acts; a holds the Lease; both run passes: one revert, one ActionReverted Event, b stands by."""
    clock = Clock()
    a, b = build(small, clock, "replica-a"), build(small, clock, "replica-b")
    assert _verifier(a).check_all() == 0  # a takes the Lease; nothing pending yet
    assert _grow(b)["result"] == "applied"
    small.settle()
    clock.at(20)
    assert _verifier(a).check_all() == 1  # a renews and reads b's action from the Lease: still pending
    clock.at(31)
    for _ in range(2):
        assert _verifier(b).check_all() == 0  # the Lease is a's and not expired
        _verifier(a).check_all()
    assert _reasons(small).count("ActionReverted") == 1
    assert _reasons(small).count("RolloutStalled") == 1
    total = sum(x.metric("reactor_verifications_total", result="reverted") for x in (a, b))
    assert total == 1


def test_a_restart_mid_verification_resumes_and_finishes(small: SimCluster, build: Build) -> None:
    """The replica that acted is gone before the timeout; a new one (another identity) takes the Lease once it
    expires, finds the workload on the Lease's list (its own memory is empty) and reverts it."""
    clock = Clock()
    first = build(small, clock, "before-restart")
    assert _grow(first)["result"] == "applied"
    clock.at(10)
    assert _verifier(first).check_all() == 1
    small.settle()
    after = build(small, clock, "after-restart")
    clock.at(20)
    assert _verifier(after).check_all() == 0  # the old holder's Lease has not expired yet
    clock.at(40)
    assert _verifier(after).check_all() == 1
    assert _verification(small)["result"] == "reverted"
    assert small.get("leases", "gpu-reactor", "gpu-reactor-verifier")["spec"]["holderIdentity"] == "after-restart"


def test_the_recently_reverted_rail_refuses_a_repeat(small: SimCluster, build: Build) -> None:
    clock, r = _grown(small, build)
    clock.at(31)
    _verifier(r).check_all()
    small.settle()
    clock.at(60)
    outcome = _grow(r)
    assert (outcome["result"], outcome["reason"]) == ("skipped", "recently-reverted")
    assert "resize-gpu-up was reverted at" in outcome["detail"]
    assert _gpus(small) == "2"


def test_one_notification_puts_all_its_changes_on_the_lease_in_one_write(build: Build) -> None:
    """Three workloads changed by one notification: one Lease update names all three (no read: the replica
    wrote the Lease last, when it took it)."""
    names = ("trainer", "trainer-b", "trainer-c")
    sim = _cluster(32, names)
    try:
        r = build(sim, Clock())
        assert _verifier(r).check_all() == 0  # takes the Lease
        sim.reset_counters()
        body = notification([AlertSpec("GPUSaturated", NAMESPACE, pod, "main", 0.98)
                             for name in names for pod in r.pods(name)])
        outcomes = r.post(body).get_json()["outcomes"]
        assert [o["result"] for o in outcomes] == ["applied"] * 3
        assert {verb: n for (verb, resource, _), n in sim.requests.items() if resource == "leases"} == {"update": 1}
        lease = sim.get("leases", "gpu-reactor", "gpu-reactor-verifier")
        assert sorted(json.loads(lease["metadata"]["annotations"]["gpu-reactor.io/verifying"])) == [
            f"Deployment/{NAMESPACE}/{name}" for name in names]
    finally:
        sim.stop()


def _cache_of(r: Reactor) -> Store:
    informers = r.service.informers
    assert informers is not None
    informers.start()
    deadline = time.monotonic() + 10
    while informers.unsynced() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not informers.unsynced()
    return informers.store


def _cached_verification(store: Store) -> str:
    obj = store.lookup("Deployment", NAMESPACE, "trainer")
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(VERIFICATION) if isinstance(obj, dict) else None
    return str(json.loads(raw)["result"]) if raw else ""


def test_with_the_watch_cache_passes_read_the_workload_from_it(roomy: SimCluster, build: Build) -> None:
    """While the rollout goes on, and when it is done, a pass reads the workload from the watch-fed cache: no
    GET of the Deployment from the change to `verified`."""
    clock = Clock()
    r = build(roomy, clock, watchCache=True)
    store = _cache_of(r)
    assert _grow(r)["result"] == "applied"
    eventually(lambda: _cached_verification(store) == "pending")
    roomy.reset_counters()
    clock.at(5)
    assert _verifier(r).check_all() == 1
    assert _verification(roomy)["result"] == "pending"
    roomy.settle()

    def verified() -> bool:
        _verifier(r).check_all()
        return bool(_verification(roomy)["result"] == "verified")

    eventually(verified)
    assert roomy.requests[("get", "deployments", "")] == 0
    assert _gpus(roomy) == "3"


def test_with_the_watch_cache_a_revert_is_decided_on_a_fresh_read(small: SimCluster, build: Build) -> None:
    """The cached copy says the rollout stalled past verify.timeout: the Deployment is read from the API server
    before anything is reverted (the cache may lag), then reverted as without the cache."""
    clock = Clock()
    r = build(small, clock, watchCache=True)
    store = _cache_of(r)
    assert _grow(r)["result"] == "applied"
    small.settle()
    eventually(lambda: _cached_verification(store) == "pending")
    small.reset_counters()
    clock.at(31)
    _verifier(r).check_all()
    assert small.requests[("get", "deployments", "")] >= 1
    assert (_gpus(small), _verification(small)["result"]) == ("2", "reverted")


def test_the_gpu_hours_stop_when_a_person_changes_the_workload(roomy: SimCluster, build: Build) -> None:
    """Issue 26: the ledger follows the workload after its verification. The grow holds 1 GPU added; a person
    sets the GPUs to 4 by hand: the next pass ends the hold (the reactor's change no longer stands)."""
    clock, r = _grown(roomy, build)
    clock.at(5)
    _verifier(r).check_all()
    assert r.metric("reactor_gpus_added", namespace=NAMESPACE) == 1
    edited = roomy.get("deployments", NAMESPACE, "trainer")
    edited["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    roomy.apply(edited)
    clock.at(10)
    _verifier(r).check_all()
    assert r.metric("reactor_gpus_added", namespace=NAMESPACE) == 0
    assert _verifier(r).ledger.held() == []


def test_the_gpu_hours_stop_when_the_workload_is_deleted(roomy: SimCluster, build: Build) -> None:
    clock, r = _grown(roomy, build)
    clock.at(5)
    _verifier(r).check_all()
    assert _verifier(r).ledger.held() != []
    roomy.delete("deployments", NAMESPACE, "trainer")
    clock.at(10)
    _verifier(r).check_all()
    assert _verifier(r).ledger.held() == []
    assert r.metric("reactor_gpus_added", namespace=NAMESPACE) == 0
