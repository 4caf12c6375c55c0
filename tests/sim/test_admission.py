"""Admission on Pod create: LimitRanger, Priority, ResourceQuota (codes and upstream wording)."""

from __future__ import annotations

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, pod
from tests.sim.helpers import status_of


def _limit_range(sim: SimCluster, **item: object) -> None:
    sim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "gpu", "namespace": "ml"},
               "spec": {"limits": [{"type": "Container", **item}]}})


def test_limit_range_max_denies_with_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """LimitRanger: `pods "p" is forbidden: maximum nvidia.com/gpu usage per Container is 4, but limit is 8`."""
    _limit_range(sim, max={GPU: "4"})
    body = status_of(lambda: core.create_namespaced_pod("ml", pod(gpus=8)), 403)
    assert body["reason"] == "Forbidden"
    assert body["message"] == 'pods "p" is forbidden: maximum nvidia.com/gpu usage per Container is 4, but limit is 8'
    assert body["details"] == {"name": "p", "kind": "pods"}


def test_limit_range_max_without_default_defaults_every_container_to_max(sim: SimCluster,
                                                                         core: k8s.CoreV1Api) -> None:
    """A LimitRange max with no default: the stored default is the max, so a GPU-less container gets it."""
    _limit_range(sim, max={GPU: "4"})
    stored = sim.get("limitranges", "ml", "gpu")["spec"]["limits"][0]
    assert stored["default"] == {GPU: "4"} and stored["defaultRequest"] == {GPU: "4"}
    created = core.create_namespaced_pod("ml", pod(gpus=None))
    assert created.spec.containers[0].resources.limits == {GPU: "4"}
    assert created.spec.containers[0].resources.requests == {GPU: "4"}


def test_limit_range_min_denies_small_request(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """LimitRanger min: `minimum cpu usage per Container is 1, but request is 500m`."""
    _limit_range(sim, min={"cpu": "1"})
    body = pod(gpus=None)
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    status = status_of(lambda: core.create_namespaced_pod("ml", body), 403)
    assert status["message"].endswith("minimum cpu usage per Container is 1, but request is 500m")


def test_missing_priority_class_is_403(core: k8s.CoreV1Api) -> None:
    """Priority admission: `pods "p" is forbidden: no PriorityClass with name burst was found`."""
    status = status_of(lambda: core.create_namespaced_pod("ml", pod(priorityClassName="burst")), 403)
    assert status["message"] == 'pods "p" is forbidden: no PriorityClass with name burst was found'


def test_priority_class_value_fills_spec_priority(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """spec.priority and preemptionPolicy come from the named PriorityClass."""
    sim.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "burst"},
               "value": 1000, "preemptionPolicy": "Never"})
    created = core.create_namespaced_pod("ml", pod(priorityClassName="burst"))
    assert created.spec.priority == 1000 and created.spec.preemption_policy == "Never"


def test_global_default_priority_class_applies(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """A pod without priorityClassName gets the globalDefault class and its value."""
    sim.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "normal"},
               "value": 10, "globalDefault": True})
    created = core.create_namespaced_pod("ml", pod())
    assert created.spec.priority_class_name == "normal" and created.spec.priority == 10


def _quota(sim: SimCluster, **hard: str) -> None:
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": "ml"},
               "spec": {"hard": hard}})


def test_quota_exceeded_is_403_with_upstream_message(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """ResourceQuota: `exceeded quota: NAME, requested: requests.nvidia.com/gpu=2, used: ...=8, limited: ...=8`."""
    _quota(sim, **{"requests.nvidia.com/gpu": "8"})
    core.create_namespaced_pod("ml", pod("big", gpus=8))
    status = status_of(lambda: core.create_namespaced_pod("ml", pod(gpus=2)), 403)
    assert status["message"] == ('pods "p" is forbidden: exceeded quota: gpu-quota, requested: '
                                 "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=8, "
                                 "limited: requests.nvidia.com/gpu=8")


def test_quota_status_tracks_pods_as_they_come_and_go(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """status.hard mirrors spec.hard; status.used counts a pod from creation (bound or not) until deletion."""
    _quota(sim, **{"requests.nvidia.com/gpu": "8", "pods": "10", "requests.memory": "4Gi"})
    body = pod(gpus=3)
    body["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    core.create_namespaced_pod("ml", body)
    quota = core.read_namespaced_resource_quota("gpu-quota", "ml").status
    assert quota.hard == {"requests.nvidia.com/gpu": "8", "pods": "10", "requests.memory": "4Gi"}
    assert quota.used == {"requests.nvidia.com/gpu": "3", "pods": "1", "requests.memory": "1Gi"}
    core.delete_namespaced_pod("p", "ml")
    assert core.read_namespaced_resource_quota("gpu-quota", "ml").status.used["requests.nvidia.com/gpu"] == "0"


def test_quota_on_cpu_requires_pods_to_specify_it(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """A quota on requests.cpu denies pods that do not set it: `failed quota: NAME: must specify requests.cpu`."""
    _quota(sim, **{"requests.cpu": "4"})
    status = status_of(lambda: core.create_namespaced_pod("ml", pod()), 403)
    assert status["message"] == 'pods "p" is forbidden: failed quota: gpu-quota: must specify requests.cpu'
