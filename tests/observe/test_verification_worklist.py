"""The verifier's work list is not lossy (issue 21): past the Lease list's bound the Lease is marked, not cut
silently, and the leader finds every pending verification by listing the workloads; with the watch cache, a pass
scans the cache for `verification: pending` whatever the Lease says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.cluster.kube.gateway import LIST_PAGE
from reactor.core.model import Action, Signal, Status, WorkloadRef
from reactor.observe.lease import MAX_PENDING, OVERFLOW_KEY, VERIFYING_KEY
from reactor.state.annotations import VERIFICATION
from reactor.state.writes import StateWrites
from reactor_sim import SimCluster
from tests.observe.test_verification import START, Clock, _cluster, verifying_reactor
from tests.support import NAMESPACE, Reactor

COUNT = MAX_PENDING + 10
GPU = "nvidia.com/gpu"


def _cronjob(name: str) -> dict[str, Any]:
    """A CronJob that runs once a year (nothing runs during the test): a change to it has nothing to roll out."""
    resources = {"limits": {GPU: "2"}, "requests": {GPU: "2"}}
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "batch:1", "resources": resources}]}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": pod}}}}}


def _changed(r: Reactor, names: list[str]) -> None:
    """Each CronJob carries the state the act step writes with a 2 → 3 GPU change (StateWrites.change, sealed with
    the reactor's key), its verification pending: as if the reactor had just changed them all."""
    view = r.service.engine.decider.view
    writes = StateWrites(view.state_keys, timedelta(0))
    signal = Signal(alert="GPUSaturated", status=Status.FIRING, keys=(("fp", "2026-03-01T11:00:00Z"),),
                    container="main", value=0.98, fingerprint="fp", starts_at="2026-03-01T11:00:00Z")
    for name in names:
        obj = r.sim.get("cronjobs", NAMESPACE, name)
        workload = view.workload(obj, "CronJob")
        action = Action(action="resize-gpu", direction="up", workload=workload.ref, container="main",
                        from_value=2, to_value=3, strategy="resize-gpu-up")
        annotations = writes.change(action, signal, workload, START)
        obj["metadata"]["annotations"] = {k: v for k, v in annotations.items() if v is not None}
        r.sim.apply(obj)


@pytest.fixture
def many(token_file: Path) -> Iterator[tuple[SimCluster, list[str]]]:
    names = [f"nightly-{i:04d}" for i in range(COUNT)]
    with _cluster(8, ()) as sim:
        sim.apply([_cronjob(n) for n in names])
        yield sim, names


def _reactor(sim: SimCluster, token_file: Path, clock: Clock, identity: str, **kube: Any) -> Reactor:
    return verifying_reactor(sim, token_file, clock, identity, {"timeout": "5s", "qps": 5000, "burst": 5000, **kube})


def _results(sim: SimCluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for obj in sim.list("cronjobs", NAMESPACE):
        raw = (obj["metadata"].get("annotations") or {}).get(VERIFICATION)
        result = json.loads(raw)["result"] if raw else "none"
        counts[result] = counts.get(result, 0) + 1
    return counts


def test_more_than_a_thousand_pending_changes_are_all_verified_after_a_restart(
        many: tuple[SimCluster, list[str]], token_file: Path) -> None:
    """1,010 changes put on the Lease (one notification's `track`): the list holds 1,000 and the Lease is marked
    overflowed. A replica started afterwards (its memory empty) lists the CronJobs, verifies every one of them, and
    the mark goes once the list holds what is left (nothing)."""
    sim, names = many
    clock = Clock()
    first = _reactor(sim, token_file, clock, "before-restart")
    _changed(first, names)
    assert first.service.verifier is not None
    assert first.service.verifier.lease is not None and first.service.verifier.lease.lead(START)
    first.service.verifier.track([WorkloadRef("CronJob", NAMESPACE, n) for n in names])
    lease = sim.get("leases", "gpu-reactor", "gpu-reactor-verifier")
    assert len(json.loads(lease["metadata"]["annotations"][VERIFYING_KEY])) == MAX_PENDING
    assert lease["metadata"]["annotations"][OVERFLOW_KEY] == "true"
    assert _results(sim) == {"pending": COUNT}
    first.service.kube.close()

    after = _reactor(sim, token_file, clock, "after-restart")
    assert after.service.verifier is not None
    clock.at(20)  # the first holder's Lease (15 s) has expired
    sim.reset_counters()
    assert after.service.verifier.check_all() == COUNT
    assert _results(sim) == {"verified": COUNT}
    # Found by one paged LIST (LIST_PAGE objects a page), not from the cut list.
    assert sim.requests[("list", "cronjobs", "")] == -(-COUNT // LIST_PAGE)
    assert after.metric("reactor_verifications_total", result="verified") == COUNT
    lease = sim.get("leases", "gpu-reactor", "gpu-reactor-verifier")
    assert OVERFLOW_KEY not in lease["metadata"]["annotations"]
    assert json.loads(lease["metadata"]["annotations"][VERIFYING_KEY]) == []
    clock.at(21)
    assert after.service.verifier.check_all() == 0
    after.service.kube.close()


def test_with_the_watch_cache_a_pass_finds_pending_changes_the_lease_does_not_list(
        many: tuple[SimCluster, list[str]], token_file: Path) -> None:
    """No Lease list at all (a replica that lost its write of it): the cache's scan finds them all."""
    import time

    sim, names = many
    clock = Clock()
    r = _reactor(sim, token_file, clock, "cached", watchCache=True)
    _changed(r, names[:50])
    informers = r.service.informers
    assert informers is not None and r.service.verifier is not None
    informers.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (informers.unsynced() or len(
                r.service.verifier.worklist._scan_cache()) < 50):
            time.sleep(0.05)
        clock.at(5)
        assert r.service.verifier.check_all() == 50
        assert _results(sim) == {"verified": 50, "none": COUNT - 50}
    finally:
        informers.stop(timeout=5)
        r.service.kube.close()
