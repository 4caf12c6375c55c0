"""In-place pod resize, admission and the kubelet's verdict, as kube-apiserver 1.33+ and the kubelet do it.

Upstream (KEP-1287 "In-place Update of Pod Resources", sections Resource Quota and Affected Components;
the ResourceQuota pod evaluator and LimitRanger handle pod updates through pods/resize): LimitRanger
checks the resized containers against the namespace's min/max; ResourceQuota charges the growth of
requests.*/limits.* against every quota whose scope matches the pod (checkRequest skips the quotas
its evaluator does not `Matches`); both refuse with 403 Forbidden and store nothing. The kubelet
(pkg/kubelet allocation manager, canAdmitPod for resizes) reports a resize it cannot apply in a
`PodResizePending` condition: reason `Infeasible` ("Node didn't have enough capacity: cpu, requested: N,
capacity: M") when it exceeds the node's allocatable, `Deferred` ("Node didn't have enough resource: cpu,
requested: N, used: U, capacity: M") when the other pods leave too little; the containers keep their
old resources in status until it fits. A resize that fits is allocated and reported as `PodResizeInProgress`
(type from pkg/apis/core PodConditionType: "the Kubelet has allocated resources for the resize, but has not yet
actuated all of the required changes"; the allocation manager sets it with no reason or message) until the
runtime has actuated it: only then do status.containerStatuses[*].resources change and the condition goes
(kubelet SyncPod: ClearPodResizeInProgressCondition once allocated == actual).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, pod
from tests.sim.helpers import status_of


def _pod(name: str = "p", cpu: str = "1") -> dict[str, Any]:
    body = pod(name=name)
    body["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1", "cpu": cpu, "memory": "1Gi"},
                                                  "limits": {GPU: "1", "cpu": cpu, "memory": "1Gi"}}
    return body


def _cpu(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}


def _running(sim: SimCluster, core: k8s.CoreV1Api, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        core.create_namespaced_pod("ml", body)
    sim.settle()


def _node(cpu: str) -> dict[str, Any]:
    status = {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110", GPU: "8"},
              "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110", GPU: "8"},
              "conditions": [{"type": "Ready", "status": "True"}]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node"}, "status": status}


def _pending(core: k8s.CoreV1Api, name: str = "p") -> list[Any]:
    got = core.read_namespaced_pod(name, "ml")
    return [c for c in got.status.conditions or [] if c.type == "PodResizePending"]


def test_resourcequota_charges_the_growth_of_a_resize_and_refuses_past_hard_with_403(
        sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """ResourceQuota admission on pods/resize: requests.cpu used 2 of 3; growing one pod by 2 cores is 403
    `exceeded quota`, nothing stored; growing it by 1 fits, and status.used follows the spec."""
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu", "namespace": "ml"},
               "spec": {"hard": {"requests.cpu": "3", "limits.cpu": "3"}}})
    _running(sim, core, _pod("p"), _pod("q"))
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _cpu("3")), 403)
    assert body["reason"] == "Forbidden"
    assert body["message"].startswith('pods "p" is forbidden: exceeded quota: cpu, requested: ')
    assert "limits.cpu=2" in body["message"] and "used: limits.cpu=2,requests.cpu=2" in body["message"]
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["cpu"] == "1"
    core.patch_namespaced_pod_resize("p", "ml", _cpu("2"))
    sim.settle()
    quota = core.read_namespaced_resource_quota("cpu", "ml")
    assert quota.status.used == {"requests.cpu": "3", "limits.cpu": "3"}


def test_a_shrinking_resize_needs_no_quota_headroom(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Quota charges increases only: a full quota still lets a pod give CPU back."""
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu", "namespace": "ml"},
               "spec": {"hard": {"requests.cpu": "2", "limits.cpu": "2"}}})
    _running(sim, core, _pod("p", "2"))
    core.patch_namespaced_pod_resize("p", "ml", _cpu("1500m"))
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["cpu"] == "1500m"


def test_a_resize_is_charged_only_to_the_quotas_whose_scope_matches_the_pod(sim: SimCluster,
                                                                          core: k8s.CoreV1Api) -> None:
    """checkRequest skips a quota its evaluator does not `Matches` (podMatchesScopeFunc): a full quota scoped
    to PriorityClass high neither limits nor counts a pod of no class, and still refuses its own class's pod."""
    sim.apply([{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                "value": 1000},
               {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "high-cpu", "namespace": "ml"},
                "spec": {"hard": {"requests.cpu": "1", "limits.cpu": "1"},
                         "scopeSelector": {"matchExpressions": [
                             {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}])
    high = _pod("p")
    high["spec"]["priorityClassName"] = "high"
    _running(sim, core, high, _pod("q"))
    core.patch_namespaced_pod_resize("q", "ml", _cpu("3"))
    assert core.read_namespaced_pod("q", "ml").spec.containers[0].resources.limits["cpu"] == "3"
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _cpu("2")), 403)
    assert body["message"].startswith('pods "p" is forbidden: exceeded quota: high-cpu, requested: ')
    sim.settle()
    assert core.read_namespaced_resource_quota("high-cpu", "ml").status.used == {"requests.cpu": "1",
                                                                                 "limits.cpu": "1"}


def test_limitranger_refuses_a_resize_past_the_container_max_with_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """LimitRanger validates pods/resize like a create: above the Container max is 403, nothing stored."""
    sim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "cpu", "namespace": "ml"},
               "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "500m"}}]}})
    _running(sim, core, _pod("p"))
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _cpu("3")), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum cpu usage per Container is 2, but limit is 3'
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _cpu("250m")), 403)
    assert body["message"] == 'pods "p" is forbidden: minimum cpu usage per Container is 500m, but request is 250m'
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["cpu"] == "1"


def _memory(request: str, limit: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": {"memory": request},
                                                                   "limits": {"memory": limit}}}]}}


def test_limitranger_checks_memory_on_a_resize_max_and_limit_to_request_ratio(
        sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Memory as CPU: above the Container max is 403; so is a limit/request above maxLimitRequestRatio
    (LimitRanger's limitRequestRatioConstraint, its wording: "provided ratio is %f"); nothing stored."""
    sim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "mem", "namespace": "ml"},
               "spec": {"limits": [{"type": "Container", "max": {"memory": "4Gi"},
                                    "maxLimitRequestRatio": {"memory": "2"}}]}})
    burstable = _pod("p")
    burstable["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2Gi"  # QoS stays Burstable throughout
    _running(sim, core, burstable)
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _memory("3Gi", "6Gi")), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum memory usage per Container is 4Gi, but limit is 6Gi'
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _memory("1Gi", "3Gi")), 403)
    assert body["message"] == ('pods "p" is forbidden: memory max limit to request ratio per Container is 2, '
                               'but provided ratio is 3.000000')
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["memory"] == "2Gi"
    core.patch_namespaced_pod_resize("p", "ml", _memory("2Gi", "4Gi"))
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["memory"] == "4Gi"


def test_resourcequota_charges_the_memory_growth_of_a_resize(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """limits.memory used 2Gi of 3Gi by two pods: growing one by 2Gi is 403, by 1Gi fits."""
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "mem", "namespace": "ml"},
               "spec": {"hard": {"requests.memory": "3Gi", "limits.memory": "3Gi"}}})
    _running(sim, core, _pod("p"), _pod("q"))
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _memory("3Gi", "3Gi")), 403)
    assert body["message"].startswith('pods "p" is forbidden: exceeded quota: mem, requested: ')
    assert "limits.memory=2Gi" in body["message"] and "requests.memory=2Gi" in body["message"]
    core.patch_namespaced_pod_resize("p", "ml", _memory("2Gi", "2Gi"))
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["memory"] == "2Gi"


def test_kubelet_reports_infeasible_beyond_the_node_s_allocatable(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Accepted by the API server, refused by the node: PodResizePending/Infeasible, old resources in status."""
    sim.apply(_node("4"))
    _running(sim, core, _pod("p"))
    core.patch_namespaced_pod_resize("p", "ml", _cpu("6"))
    sim.settle()
    (cond,) = _pending(core)
    assert (cond.status, cond.reason) == ("True", "Infeasible")
    assert cond.message == "Node didn't have enough capacity: cpu, requested: 6000, capacity: 4000"
    got = core.read_namespaced_pod("p", "ml")
    assert got.spec.containers[0].resources.limits["cpu"] == "6"
    assert got.status.container_statuses[0].resources.limits["cpu"] == "1"


def test_kubelet_defers_a_resize_the_other_pods_leave_no_room_for_then_applies_it(
        sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Deferred while the node is full; re-evaluated on every sync: applied once room is made."""
    sim.apply(_node("4"))
    _running(sim, core, _pod("p"), _pod("q", "2"))
    core.patch_namespaced_pod_resize("p", "ml", _cpu("3"))
    sim.settle()
    (cond,) = _pending(core)
    assert cond.reason == "Deferred"
    assert cond.message == "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000"
    assert core.read_namespaced_pod("p", "ml").status.container_statuses[0].resources.limits["cpu"] == "1"
    core.delete_namespaced_pod("q", "ml", grace_period_seconds=0)
    sim.settle()
    assert _pending(core) == []
    assert core.read_namespaced_pod("p", "ml").status.container_statuses[0].resources.limits["cpu"] == "3"


def _conditions(core: k8s.CoreV1Api, name: str = "p") -> list[tuple[str, str, str | None, str | None]]:
    got = core.read_namespaced_pod(name, "ml")
    return [(c.type, c.status, c.reason, c.message) for c in got.status.conditions or []
            if c.type.startswith("PodResize")]


def test_an_allocated_resize_is_in_progress_until_actuated(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Upstream, step by step: accepted by the API server, nothing yet (the kubelet has not synced); the
    kubelet allocates it: PodResizeInProgress True without reason or message, status.resources still the old
    ones; the runtime actuates it: status.resources are the new ones and the condition is cleared."""
    _running(sim, core, _pod("p"))
    core.patch_namespaced_pod_resize("p", "ml", _cpu("2"))
    assert _conditions(core) == []
    sim.controllers.run_once()
    assert _conditions(core) == [("PodResizeInProgress", "True", None, None)]
    got = core.read_namespaced_pod("p", "ml")
    assert got.status.container_statuses[0].resources.limits["cpu"] == "1"
    (cond,) = [c for c in got.status.conditions if c.type == "PodResizeInProgress"]
    assert cond.last_transition_time is not None
    sim.controllers.run_once()
    assert _conditions(core) == []
    assert core.read_namespaced_pod("p", "ml").status.container_statuses[0].resources.limits["cpu"] == "2"


def test_a_deferred_resize_goes_through_in_progress_once_room_is_made(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    sim.apply(_node("4"))
    _running(sim, core, _pod("p"), _pod("q", "2"))
    core.patch_namespaced_pod_resize("p", "ml", _cpu("3"))
    sim.controllers.run_once()
    assert [c[:3] for c in _conditions(core)] == [("PodResizePending", "True", "Deferred")]
    core.delete_namespaced_pod("q", "ml", grace_period_seconds=0)
    sim.controllers.run_once()
    assert _conditions(core) == [("PodResizeInProgress", "True", None, None)]
    sim.settle()
    assert _conditions(core) == []
    assert core.read_namespaced_pod("p", "ml").status.container_statuses[0].resources.limits["cpu"] == "3"
