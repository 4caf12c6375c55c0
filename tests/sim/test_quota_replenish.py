"""ResourceQuota status.used follows pods that go away, as kube-apiserver's quota controller keeps it: a pod
counts only while the pod evaluator's `QuotaV1Pod` (kubernetes pkg/quota/v1/evaluator/core/pods.go) says it is
tracked — not terminal (Succeeded/Failed), and not past its deletion grace period — and the controller's
replenishment (pkg/controller/resourcequota, `replenishQuota` on a pod's delete or phase change) recounts the
quota. Rebalancing reads exactly this: a donor's scale-down shows as room only once its pods are gone."""

from __future__ import annotations

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, deployment

KEY = f"requests.{GPU}"


def _used(core: k8s.CoreV1Api) -> str:
    return core.read_namespaced_resource_quota("gpu", "ml").status.used[KEY]


def _quota(sim: SimCluster) -> None:
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "ml"},
               "spec": {"hard": {KEY: "8"}}})


def test_a_deleted_pod_leaves_the_quota_at_once(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """A pod deleted with grace period 0 (the simulated kubelet has nothing to stop) is past its grace period at
    once: QuotaV1Pod no longer tracks it, and used drops before any controller replaces it."""
    _quota(sim)
    sim.apply(deployment("train", replicas=2, gpus=2))
    sim.settle()
    assert _used(core) == "4"
    victim = core.list_namespaced_pod("ml", label_selector="app=train").items[0].metadata.name
    core.delete_namespaced_pod(victim, "ml")
    assert _used(core) == "2"
    sim.settle()  # the ReplicaSet controller replaces it
    assert _used(core) == "4"


def test_a_scale_down_frees_its_pods_quota_once_the_controller_deletes_them(sim: SimCluster, core: k8s.CoreV1Api,
                                                                            apps: k8s.AppsV1Api) -> None:
    """The Deployment's spec changes first; used changes only when the ReplicaSet controller deleted the pod."""
    _quota(sim)
    sim.apply(deployment("train", replicas=2, gpus=2))
    sim.settle()
    apps.patch_namespaced_deployment("train", "ml", {"spec": {"replicas": 1}})
    assert _used(core) == "4"
    sim.settle()
    assert _used(core) == "2"


def test_a_finished_pod_is_not_counted(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """QuotaV1Pod: a pod in phase Succeeded or Failed is terminal and ignored for quota."""
    _quota(sim)
    sim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once", "namespace": "ml"},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "img:1", "resources": {
                   "limits": {GPU: "2"}, "requests": {GPU: "2"}}}]}})
    sim.settle()
    assert _used(core) == "2"
    sim.finish_pod("ml", "once")
    sim.settle()
    assert _used(core) == "0"
