"""Scoped ResourceQuotas over real HTTP against the embedded cluster (issue 13's cases (a) and (b)): the reactor
counts a change against every quota whose scope matches the pods it will create, and only those."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, serving

GPU = build.GPU


def _trainer(priority: str | None, name: str = "trainer", replicas: int = 3) -> build.Obj:
    return build.deployment(name, build.container(image="trainer:1", gpus=1), replicas=replicas, priority=priority)


def _scoped_quota(name: str, cls: str, hard: int) -> build.Obj:
    return build.quota(name, {f"requests.{GPU}": hard}, priority=cls)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """The namespace with the seed's PriorityClasses (deploy/base) and one Ready 8-GPU Node, nothing else."""
    with build.start(build.namespace(), build.gpu_node(), priority_classes=True, settle=False) as sim:
        yield sim


def test_a_priority_change_that_the_new_class_quota_cannot_hold_is_refused(cluster: SimCluster,
                                                                             token_file: Path) -> None:
    """(a) 3 × 1 GPU at medium priority, `high-gpu` scoped to high-priority-gpu with 2 GPUs: set-priority-up
    would move all 3 pods into it, so it is refused before any write, naming the scoped quota."""
    cluster.apply([_trainer("medium-priority-gpu"), _scoped_quota("high-gpu", "high-priority-gpu", 2)])
    cluster.settle()
    before = cluster.get("deployments", NAMESPACE, "trainer")["metadata"]["resourceVersion"]
    with serving(cluster, token_file, alerts={"GPUSaturated": ["set-priority-up"]}) as r:
        (outcome,) = {o["workload"]: o for o in r.post(r.alerts("GPUSaturated", "trainer", "main",
                                                                value=0.98)).get_json()["outcomes"]}.values()
        assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
        assert ("class medium-priority-gpu→high-priority-gpu needs 3 GPUs of quota high-gpu (replicas 3, surge 1, "
                "every pod moves into its scope), headroom 2 (hard 2, used 0)") in outcome["detail"]
    assert cluster.get("deployments", NAMESPACE, "trainer")["metadata"]["resourceVersion"] == before
    assert not any(verb in ("patch", "update") for verb, *_ in cluster.requests)


def test_the_refused_change_would_have_stalled_the_rollout(cluster: SimCluster) -> None:
    """Why (a) must be refused: the API server admits the template change, then its third pod fails
    `exceeded quota: high-gpu` and the rollout stops at 2 of 3, the old pod still running."""
    cluster.apply([_trainer("medium-priority-gpu"), _scoped_quota("high-gpu", "high-priority-gpu", 2)])
    cluster.settle()
    cluster.apply(_trainer("high-priority-gpu"))
    cluster.settle()
    classes = sorted(p["spec"]["priorityClassName"] for p in cluster.list("pods", NAMESPACE))
    assert classes == ["high-priority-gpu", "high-priority-gpu", "medium-priority-gpu"]
    failed = [e for e in cluster.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]
    assert failed and "exceeded quota: high-gpu" in failed[-1]["message"]


def test_a_quota_scoped_to_another_class_does_not_block(cluster: SimCluster, token_file: Path) -> None:
    """(b) `burst-gpu` scoped to burst-gpu with hard 0 and a workload without PriorityClass: its pods are not
    counted by that quota, so the reactor acts and the API server admits the new pods."""
    cluster.apply([_trainer(None), _scoped_quota("burst-gpu", "burst-gpu", 0)])
    cluster.settle()
    with serving(cluster, token_file, alerts={"GPUSaturated": ["resize-gpu-up"]}) as r:
        outcomes = r.post(r.alerts("GPUSaturated", "trainer", "main", value=0.98)).get_json()["outcomes"]
        assert {(o["result"], o["action"], o["from"], o["to"]) for o in outcomes} == {("applied", "resize-gpu", 1, 2)}
    cluster.settle()
    pods = cluster.list("pods", NAMESPACE)
    assert sorted(p["spec"]["containers"][0]["resources"]["limits"][GPU] for p in pods) == ["2", "2", "2"]
    assert cluster.get("resourcequotas", NAMESPACE, "burst-gpu")["status"]["used"] == {f"requests.{GPU}": "0"}


def test_two_workloads_moving_into_one_class_quota_in_one_notification(cluster: SimCluster, token_file: Path) -> None:
    """The quota a first priority change fills is reserved for the rest of the notification: with room for 3 GPUs
    in high-gpu, the first 2-replica Deployment moves up and the second is refused, not left stalled."""
    cluster.apply([_trainer("medium-priority-gpu", "a", 2), _trainer("medium-priority-gpu", "b", 2),
                   _scoped_quota("high-gpu", "high-priority-gpu", 3)])
    cluster.settle()
    with serving(cluster, token_file, alerts={"GPUSaturated": ["set-priority-up"]}) as r:
        body = r.alerts("GPUSaturated", "a", "main", value=0.98)
        body["alerts"] += r.alerts("GPUSaturated", "b", "main", value=0.98)["alerts"]
        outcomes = {o["workload"]: o for o in r.post(body).get_json()["outcomes"]}
    assert [(o["result"], o.get("reason")) for _, o in sorted(outcomes.items())] == [
        ("applied", None), ("skipped", "quota-exceeded")]
    assert "headroom 1 (hard 3, used 2)" in sorted(outcomes.items())[1][1]["detail"]
    cluster.settle()
    assert not [e for e in cluster.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]
