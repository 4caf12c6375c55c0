"""The verifier's Lease written as kube-apiserver decodes it, at a whole second too (issue 25).

The official client's generated methods turned the Lease dict into its V1Lease model and wrote each MicroTime
with `isoformat()`: `2026-03-01T12:00:00+00:00` at a whole second, which kube-apiserver refuses (400, `cannot parse
"+00:00" as ".000000"`: apimachinery meta/v1 micro_time.go reads RFC3339Micro only). The embedded cluster decodes
as upstream does (tests/sim/test_micro_time.py), so these fail on the old path.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from freezegun import freeze_time

from reactor.cluster.kube import KubeGateway
from reactor.core.model import WorkloadRef
from reactor.observe.lease import VerifierLease, micro_time, pending_refs
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import kube_gateway

WHOLE = "2026-03-01T12:00:00Z"
REF = WorkloadRef("Deployment", "ml-workloads", "trainer")


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with build.start(build.namespace("gpu-reactor"), settle=False) as cluster:
        yield cluster


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    with kube_gateway(sim) as gateway:
        yield gateway


def _lease(kube: KubeGateway, identity: str = "a") -> VerifierLease:
    return VerifierLease(kube, namespace="gpu-reactor", name="verifier", identity=identity,
                         duration=timedelta(seconds=15))


def test_create_renew_and_list_updates_at_a_whole_second(kube: KubeGateway, sim: SimCluster) -> None:
    lease = _lease(kube)
    with freeze_time(WHOLE):
        now = datetime.now(UTC)
        assert now.microsecond == 0
        assert lease.lead(now), "created"
        assert lease.lead(now), "renewed: an update carrying both times"
        lease.add_all((REF,), now)
        lease.remove_all((REF,), now)
        lease.add(REF, now)
    spec = sim.get("leases", "gpu-reactor", "verifier")["spec"]
    assert spec["acquireTime"] == spec["renewTime"] == "2026-03-01T12:00:00.000000Z"
    assert pending_refs(kube.get_lease("gpu-reactor", "verifier")) == {REF}


def test_a_takeover_at_a_whole_second_writes_both_times(kube: KubeGateway, sim: SimCluster) -> None:
    with freeze_time(WHOLE):
        assert _lease(kube, "a").lead(datetime.now(UTC))
    with freeze_time("2026-03-01T12:00:30Z"):
        assert _lease(kube, "b").lead(datetime.now(UTC))
    spec = sim.get("leases", "gpu-reactor", "verifier")["spec"]
    assert (spec["holderIdentity"], spec["acquireTime"], spec["leaseTransitions"]) == (
        "b", "2026-03-01T12:00:30.000000Z", 1)


def test_micro_time_is_rfc3339_micro_in_utc() -> None:
    assert micro_time(datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) == "2026-03-01T12:00:00.000000Z"
    assert micro_time(datetime(2026, 3, 1, 14, 0, 0, 7, tzinfo=timezone(timedelta(hours=2)))) == \
        "2026-03-01T12:00:00.000007Z", "converted, not printed with a wrong Z"
    assert micro_time(datetime(2026, 3, 1, 12, 0)) == "2026-03-01T12:00:00.000000Z"


def test_fields_the_client_does_not_model_go_back_as_read(kube: KubeGateway, sim: SimCluster) -> None:
    """A newer server's Lease field (the client's V1LeaseSpec forbids unknown ones) is written back, not refused."""
    sim.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "verifier", "namespace": "gpu-reactor"},
               "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-03-01T11:00:00.000000Z",
                        "acquireTime": "2026-03-01T11:00:00.000000Z", "leaseTransitions": 0,
                        "futureField": "kept"}})
    lease = _lease(kube)
    lease.add(REF, datetime(2026, 3, 1, 12, tzinfo=UTC))
    stored = sim.get("leases", "gpu-reactor", "verifier")
    assert stored["spec"]["futureField"] == "kept"
    assert pending_refs(stored) == {REF}
