"""Deployment revision history and minReadySeconds (pkg/controller/deployment: cleanupDeployment,
SetNewReplicaSetAnnotations; podutil.IsPodAvailable)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reactor_sim import SimCluster
from tests.sim.builders import GPU, deployment, gpu_node
from tests.sim.helpers import set_gpus

REVISION = "deployment.kubernetes.io/revision"


def _cluster(clock: Any = None) -> SimCluster:
    sim = SimCluster(clock=clock)
    sim.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, gpu_node(gpus=64)])
    return sim


def _revisions(sim: SimCluster) -> dict[int, int]:
    """revision -> GPUs of that ReplicaSet's template."""
    return {int(rs["metadata"]["annotations"][REVISION]):
            int(rs["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU])
            for rs in sim.list("replicasets", "ml")}


def test_old_replicasets_beyond_the_history_limit_are_deleted() -> None:
    """revisionHistoryLimit 2: after a complete rollout only the two newest old ReplicaSets remain (lowest
    revisions go first); the Deployment's revision annotation follows the newest."""
    sim = _cluster()
    body = deployment(replicas=2)
    body["spec"]["revisionHistoryLimit"] = 2
    sim.apply(body)
    sim.settle()
    for gpus in (2, 3, 4, 5):
        set_gpus(sim, gpus)
    assert _revisions(sim) == {3: 3, 4: 4, 5: 5}
    assert sim.get("deployments", "ml", "web")["metadata"]["annotations"][REVISION] == "5"


def test_the_default_history_limit_is_ten() -> None:
    sim = _cluster()
    sim.apply(deployment())
    sim.settle()
    assert sim.get("deployments", "ml", "web")["spec"]["revisionHistoryLimit"] == 10
    for gpus in range(2, 14):
        set_gpus(sim, gpus)
    assert sorted(_revisions(sim)) == list(range(3, 14))


def test_returning_to_an_earlier_template_reuses_its_replicaset_as_the_newest_revision() -> None:
    """A revert (template equal to an older one) scales the old ReplicaSet back up; it becomes revision
    max+1 and keeps its former number in `deployment.kubernetes.io/revision-history`."""
    sim = _cluster()
    sim.apply(deployment(replicas=2))
    sim.settle()
    first = sim.list("replicasets", "ml")[0]["metadata"]["name"]
    set_gpus(sim, 2)
    set_gpus(sim, 1)
    rss = {rs["metadata"]["name"]: rs for rs in sim.list("replicasets", "ml")}
    assert len(rss) == 2
    back = rss[first]
    assert back["spec"]["replicas"] == 2
    assert back["metadata"]["annotations"][REVISION] == "3"
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert sim.get("deployments", "ml", "web")["metadata"]["annotations"][REVISION] == "3"


def test_a_history_limit_of_zero_keeps_no_old_replicaset() -> None:
    sim = _cluster()
    body = deployment(replicas=1)
    body["spec"]["revisionHistoryLimit"] = 0
    sim.apply(body)
    sim.settle()
    set_gpus(sim, 2)
    assert _revisions(sim) == {2: 2}


def test_old_replicasets_are_kept_while_a_rollout_is_incomplete() -> None:
    """Cleanup waits for DeploymentComplete: while the new pods are denied by quota, even a scaled-down
    ReplicaSet beyond the limit stays."""
    sim = _cluster()
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
               "spec": {"hard": {f"requests.{GPU}": "5"}}})
    body = deployment(replicas=2)
    body["spec"]["revisionHistoryLimit"] = 1
    sim.apply(body)
    sim.settle()
    set_gpus(sim, 2)  # revision 2 fits (surge 1: 2 + 2 <= 5)
    set_gpus(sim, 3)  # revision 3 does not: its first pod would need 3 more
    replicas = {int(rs["metadata"]["annotations"][REVISION]): rs["spec"]["replicas"]
                for rs in sim.list("replicasets", "ml")}
    assert replicas == {1: 0, 2: 2, 3: 1}


def test_min_ready_seconds_delays_availability_and_the_rollout() -> None:
    """minReadySeconds 30: a Ready pod counts as available only 30 s after it became Ready, so the rolling
    update (maxUnavailable 0) keeps the old pod until then."""
    now = [datetime(2026, 11, 30, 2, 0, tzinfo=UTC)]
    sim = _cluster(clock=lambda: now[0])
    body = deployment(replicas=1)
    body["spec"].update(minReadySeconds=30, strategy={"type": "RollingUpdate",
                                                       "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    sim.apply(body)
    sim.settle()
    status = sim.get("deployments", "ml", "web")["status"]
    assert status.get("readyReplicas") == 1 and status.get("availableReplicas", 0) == 0
    (rs,) = sim.list("replicasets", "ml")
    assert rs["spec"]["minReadySeconds"] == 30
    now[0] += timedelta(seconds=30)
    sim.settle()
    assert sim.get("deployments", "ml", "web")["status"]["availableReplicas"] == 1
    set_gpus(sim, 2)
    assert len(sim.list("pods", "ml")) == 2, "the old pod stays until the new one is available"
    now[0] += timedelta(seconds=30)
    sim.settle()
    (pod,) = sim.list("pods", "ml")
    assert pod["spec"]["containers"][0]["resources"]["limits"][GPU] == "2"
