"""The verifier Lease against the embedded cluster: leader election with resourceVersion preconditions, the
bounded list of pending verifications (hostile entries dropped), and the verifier thread's start and stop."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from reactor.cluster.kube import KubeGateway
from reactor.core.metrics import Metrics
from reactor.core.model import WorkloadRef
from reactor.observe.lease import VERIFYING_KEY, VerifierLease, pending_refs
from tests import cluster_builder as build
from tests.support import kube_gateway

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REF = WorkloadRef("Deployment", "ml-workloads", "trainer")


@pytest.fixture
def kube() -> Iterator[KubeGateway]:
    with build.start(build.namespace("gpu-reactor"), settle=False) as sim, kube_gateway(sim) as gateway:
        yield gateway


def _lease(kube: KubeGateway, identity: str) -> VerifierLease:
    return VerifierLease(kube, namespace="gpu-reactor", name="verifier", identity=identity,
                         duration=timedelta(seconds=15))


def test_one_holder_at_a_time_and_takeover_only_after_expiry(kube: KubeGateway) -> None:
    a, b = _lease(kube, "a"), _lease(kube, "b")
    assert a.lead(T0) and not b.lead(T0 + timedelta(seconds=5))
    assert a.lead(T0 + timedelta(seconds=10))  # renewed
    assert not b.lead(T0 + timedelta(seconds=24))  # 10 + 15 not yet passed
    assert b.lead(T0 + timedelta(seconds=26)) and not a.lead(T0 + timedelta(seconds=27))
    spec = kube.get_lease("gpu-reactor", "verifier")["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


def test_leadership_is_read_from_the_last_copy_without_a_request(kube: KubeGateway) -> None:
    """reactor_verifier_leader's source: the Lease as this replica last read or wrote it, and its expiry."""
    a, b = _lease(kube, "a"), _lease(kube, "b")
    assert not a.leading(T0)  # nothing read yet
    assert a.lead(T0) and a.leading(T0 + timedelta(seconds=14))
    assert not a.leading(T0 + timedelta(seconds=16))  # its term ran out without a renewal
    assert not b.lead(T0 + timedelta(seconds=5)) and not b.leading(T0 + timedelta(seconds=5))


def test_a_stale_read_loses_the_race_with_a_409(kube: KubeGateway) -> None:
    """Both replicas read the expired Lease; the first update wins, the second (stale resourceVersion) is a 409
    and that replica stands by instead of overwriting: the optimistic concurrency client-go's election uses."""
    a, b = _lease(kube, "a"), _lease(kube, "b")
    assert a.lead(T0)
    stale = kube.get_lease("gpu-reactor", "verifier")
    assert b.lead(T0 + timedelta(seconds=20))
    stale["spec"]["holderIdentity"] = "a"
    assert not a._update(stale)
    assert kube.get_lease("gpu-reactor", "verifier")["spec"]["holderIdentity"] == "b"


def test_an_update_without_a_resource_version_is_refused_before_it_is_sent(kube: KubeGateway) -> None:
    with pytest.raises(ValueError, match="resourceVersion"):
        kube.update_lease("gpu-reactor", "verifier", {"metadata": {"name": "verifier"}, "spec": {}})


def test_the_pending_list_is_shared_and_bounded(kube: KubeGateway) -> None:
    a, b = _lease(kube, "a"), _lease(kube, "b")
    a.add(REF, T0)
    b.add(WorkloadRef("StatefulSet", "ml-workloads", "t2"), T0)
    assert a.pending() == {REF, WorkloadRef("StatefulSet", "ml-workloads", "t2")}
    b.remove(REF, T0)
    assert a.pending() == {WorkloadRef("StatefulSet", "ml-workloads", "t2")}


def test_each_change_of_the_list_is_one_write_and_a_stale_copy_is_read_again() -> None:
    """The list is changed from the copy this replica last read or wrote: one PUT per change and no GET while no
    other replica writes; after another replica's write, the PUT of the stale copy is a 409, the Lease is read
    again and the change applied to what it holds, so nothing another replica put on the list is lost."""
    refs = [WorkloadRef("Deployment", "ml-workloads", f"t{i}") for i in range(6)]
    with build.start(build.namespace("gpu-reactor"), settle=False) as sim, kube_gateway(sim) as kube:
        a, b = _lease(kube, "a"), _lease(kube, "b")

        def lease_requests() -> dict[str, int]:
            counts = {verb: n for (verb, resource, _), n in sim.requests.items() if resource == "leases"}
            sim.reset_counters()
            return counts

        a.add_all(refs[:2], T0)
        assert lease_requests() == {"get": 1, "create": 1}  # none yet: created with both on it
        a.add_all(refs[2:4], T0)
        assert lease_requests() == {"update": 1}
        a.add_all(refs[2:4], T0)
        assert lease_requests() == {"get": 1}  # already on it, as the Lease says when read again: nothing written
        b.remove(refs[3], T0)
        sim.reset_counters()
        a.add(refs[3], T0)  # a's copy still lists it; b took it off: a reads again and puts it back
        assert lease_requests() == {"get": 1, "update": 1}
        assert refs[3] in b.pending()
        lease_requests()
        b.add(refs[4], T0)
        assert lease_requests() == {"update": 1}  # b's copy is the one it just read
        a.add(refs[5], T0)
        assert lease_requests() == {"update": 2, "get": 1}  # 409 on the stale copy, read, written
        assert b.pending() == set(refs)
        a.remove_all(refs[:3], T0)
        assert a.pending() == set(refs[3:])
        kube.close()


def test_hostile_entries_on_the_list_are_dropped() -> None:
    raw = json.dumps(["Deployment/ml/ok", "Pod/ml/p", "Deployment/ML/bad", "Secret/ml/s", "a/b", 7,
                      "Deployment/ml/x/y"])
    assert pending_refs({"metadata": {"annotations": {VERIFYING_KEY: raw}}}) == {WorkloadRef("Deployment", "ml", "ok")}
    assert pending_refs({"metadata": {"annotations": {VERIFYING_KEY: "{not json"}}}) == set()


def test_the_verifier_thread_runs_passes_and_stops(kube: KubeGateway, token_file: object) -> None:
    from reactor.app.assembly import assemble
    from tests.support import make_settings, with_prometheus

    settings, _ = with_prometheus(make_settings(token_file,  # type: ignore[arg-type]
                                                verify={"interval": "1s", "leaseName": None}))
    service = assemble(settings, kube=kube, metrics=Metrics(CollectorRegistry()))
    verifier = service.verifier
    assert verifier is not None and verifier.lease is None
    passes: list[int] = []
    original = verifier.check_all
    verifier.check_all = lambda: passes.append(original()) or 0  # type: ignore[method-assign]
    verifier.start()
    deadline = time.monotonic() + 10
    while not passes and time.monotonic() < deadline:
        time.sleep(0.1)
    verifier.stop()
    assert passes == [0] * len(passes) and passes
    assert verifier._loop.thread is not None and not verifier._loop.thread.is_alive()


def test_past_the_bound_the_list_is_marked_not_cut_silently(kube: KubeGateway) -> None:
    """MAX_PENDING refs fit; one more marks the Lease overflowed (the leader then lists the workloads); a scan's
    `settle` clears the mark once the list holds every pending ref again. Operators' kinds are kept when the Lease
    is told the reactor changes them (a restart drops no kind)."""
    from reactor.observe.lease import MAX_PENDING, OVERFLOW_KEY

    notebook = WorkloadRef("Notebook", "ml-workloads", "jupyter")
    lease = VerifierLease(kube, namespace="gpu-reactor", name="verifier", identity="a",
                          duration=timedelta(seconds=15), kinds=frozenset({"Deployment", "Notebook"}))
    refs = [WorkloadRef("Deployment", "ml-workloads", f"t{i:04d}") for i in range(MAX_PENDING)]
    lease.add_all([*refs, notebook], T0)
    listed, overflowed = lease.read_list()
    assert overflowed and len(listed) == MAX_PENDING and notebook not in listed  # sorted: the Notebook was left off
    assert kube.get_lease("gpu-reactor", "verifier")["metadata"]["annotations"][OVERFLOW_KEY] == "true"
    lease.remove_all(refs[:10], T0)
    assert lease.read_list()[1]  # removing some does not say the list holds them all: only a scan can
    lease.settle({notebook}, T0)
    listed, overflowed = lease.read_list()
    assert not overflowed and notebook in listed and len(listed) == MAX_PENDING - 10 + 1
    assert OVERFLOW_KEY not in kube.get_lease("gpu-reactor", "verifier")["metadata"]["annotations"]
    assert VerifierLease(kube, namespace="gpu-reactor", name="verifier", identity="b",
                         duration=timedelta(seconds=15)).pending() == listed - {notebook}
