"""A Deployment's template put back to an older one, as kube-controller-manager's Deployment controller handles it.

Checked against kubernetes/kubernetes pkg/controller/deployment (rolling.go: `rolloutRolling`,
`reconcileNewReplicaSet`, `reconcileOldReplicaSets`, `cleanupUnhealthyReplicas`,
`scaleDownOldReplicaSetsForRollingUpdate`; util/deployment_util.go: `FindNewReplicaSet`, `EqualIgnoreHash`,
`NewRSNewReplicas`, `MaxUnavailable`), read in the stored copy of rolling.go at commit 95f08499 (the same logic as
the v1.28 tag, with Go's builtin `min`). What was checked there:

- the new ReplicaSet is the oldest one whose template equals the Deployment's, the hash label ignored, so a
  template put back makes the older ReplicaSet the new one again (no new ReplicaSet is made);
- a sync that scales the new ReplicaSet up does nothing else; otherwise old ReplicaSets are scaled down, at most
  `maxScaledDown = all replicas − minAvailable − (new ReplicaSet's replicas − its available)`;
- of that, each old ReplicaSet's unavailable replicas go first, oldest ReplicaSet first
  (`cleanupUnhealthyReplicas`), then available ones while more than minAvailable stay available.

The same was seen on a real kube-apiserver v1.28 with kube-controller-manager: a raise 2 → 3 GPUs that could not
be scheduled, then the template put back to 2 — the 3-GPU ReplicaSet went to 0, the Pending pod was deleted, and
the pod that ran before kept running.
"""

from __future__ import annotations

from typing import Any

from reactor_sim import SimCluster
from tests.sim.builders import GPU, deployment, gpu_node
from tests.sim.helpers import set_gpus


def _cluster(gpus: int) -> SimCluster:
    sim = SimCluster()
    sim.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, gpu_node(gpus=gpus)])
    return sim


def _pods(sim: SimCluster) -> dict[str, tuple[str, str]]:
    """name -> (phase, GPUs) of the Deployment's pods that are not being deleted."""
    return {p["metadata"]["name"]: (p["status"].get("phase", ""),
                                    p["spec"]["containers"][0]["resources"]["limits"][GPU])
            for p in sim.list("pods", "ml") if not p["metadata"].get("deletionTimestamp")}


def _replicas(sim: SimCluster) -> dict[str, int]:
    """GPUs of each ReplicaSet's template -> its spec.replicas."""
    return {rs["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU]: rs["spec"]["replicas"]
            for rs in sim.list("replicasets", "ml")}


def _single(sim: SimCluster, replicas: int, gpus: int) -> dict[str, Any]:
    sim.apply(deployment(replicas=replicas, gpus=gpus))
    sim.settle()
    return sim.get("deployments", "ml", "web")


def test_a_stalled_raise_put_back_leaves_no_pending_pod() -> None:
    """One replica, 2 GPUs on a 4-GPU node; raised to 3 (maxSurge 1: a 3-GPU pod that cannot be scheduled, Pending),
    then put back to 2. The 2-GPU ReplicaSet is the new one again, the 3-GPU one goes to 0 and its Pending pod is
    deleted (`cleanupUnhealthyReplicas`); the pod that ran before is the same pod, still Running."""
    sim = _cluster(gpus=4)
    _single(sim, replicas=1, gpus=2)
    (before,) = _pods(sim)
    set_gpus(sim, 3)
    assert sorted(_pods(sim).values()) == [("Pending", "3"), ("Running", "2")]
    set_gpus(sim, 2)
    assert _pods(sim) == {before: ("Running", "2")}
    assert _replicas(sim) == {"2": 1, "3": 0}
    status = sim.get("deployments", "ml", "web")["status"]
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (1, 1, 1)


def test_the_template_put_back_makes_no_new_replicaset() -> None:
    """FindNewReplicaSet compares templates (EqualIgnoreHash): the first ReplicaSet is found again and holds the
    replica; no third one is created, and the Deployment's revision follows it (revision 3, history 1)."""
    sim = _cluster(gpus=4)
    _single(sim, replicas=1, gpus=2)
    (first,) = {rs["metadata"]["name"] for rs in sim.list("replicasets", "ml")}
    set_gpus(sim, 3)
    set_gpus(sim, 2)
    names = {rs["metadata"]["name"]: rs for rs in sim.list("replicasets", "ml")}
    assert len(names) == 2 and names[first]["spec"]["replicas"] == 1
    assert names[first]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert sim.get("deployments", "ml", "web")["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"


def test_unavailable_old_pods_go_before_available_ones() -> None:
    """Four replicas (maxSurge 1, maxUnavailable 1) at 2 GPUs on a 9-GPU node: raised to 3, one 3-GPU pod runs
    (1 GPU left) and the next cannot be scheduled. Put back to 2: the old 3-GPU ReplicaSet's unavailable pod goes
    first, then its running one, and four 2-GPU pods run — never fewer than three available on the way."""
    sim = _cluster(gpus=9)
    _single(sim, replicas=4, gpus=2)
    set_gpus(sim, 3)
    phases = sorted(_pods(sim).values())
    assert ("Pending", "3") in phases and ("Running", "3") in phases, phases
    set_gpus(sim, 2)
    assert sorted(_pods(sim).values()) == [("Running", "2")] * 4
    assert _replicas(sim) == {"2": 4, "3": 0}


def test_a_rollout_that_completes_still_rolls_within_surge_and_unavailability() -> None:
    """A raise that fits: every step keeps at most desired + maxSurge replicas and at least desired −
    maxUnavailable available (reconcileNewReplicaSet first, then reconcileOldReplicaSets)."""
    sim = _cluster(gpus=64)
    _single(sim, replicas=4, gpus=1)
    d = sim.get("deployments", "ml", "web")
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: "2"}, "requests": {GPU: "2"}}
    sim.apply(d)
    for _ in range(100):
        with sim.store.lock:
            before = sim.store.resource_version
            sim.controllers.run_once()
        counts = [rs["spec"]["replicas"] for rs in sim.list("replicasets", "ml")]
        available = sum((rs.get("status") or {}).get("availableReplicas", 0) for rs in sim.list("replicasets", "ml"))
        assert sum(counts) <= 5 and available >= 3, (counts, available)
        if sim.store.resource_version == before:
            break
    assert _replicas(sim) == {"1": 0, "2": 4}
