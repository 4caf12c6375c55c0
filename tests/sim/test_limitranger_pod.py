"""LimitRanger's `type: Pod` items on create and on pods/resize, as kube-apiserver does them.

Upstream: plugin/pkg/admission/limitranger/admission.go, PodValidateLimitFunc: a Pod item's min, max and
maxLimitRequestRatio apply to the pod's requests and limits as `podRequests` / `podLimits` total them (every
container, sidecars — init containers with restartPolicy Always — added, at least any other init container plus
the sidecars before it), through minConstraint ("minimum %s usage per %s is %s, but request is %s"),
maxConstraint ("maximum %s usage per %s is %s, but limit is %s"; "No limit is specified" when no container sets
it) and limitRequestRatioConstraint; a violation is 403 Forbidden and nothing is stored. pods/resize is
validated the same way (kube-apiserver 1.33+, see tests/sim/test_resize_admission.py).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, pod
from tests.sim.helpers import status_of


def _pod_item(sim: SimCluster, **item: object) -> None:
    sim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "per-pod", "namespace": "ml"},
               "spec": {"limits": [{"type": "Pod", **item}]}})


def _two(cpu: tuple[str, str], gpus: tuple[int, int] = (1, 0), memory: tuple[str, str] = ("1Gi", "1Gi"),
         name: str = "p") -> dict[str, Any]:
    body = pod(name=name)
    body["spec"]["containers"] = [
        {"name": n, "image": "busybox", "resources": {
            "requests": {"cpu": c, "memory": m, **({GPU: str(g)} if g else {})},
            "limits": {"cpu": c, "memory": m, **({GPU: str(g)} if g else {})}}}
        for n, c, g, m in zip(("main", "sidecar"), cpu, gpus, memory, strict=True)]
    return body


def test_the_pods_cpu_sum_over_the_pod_max_is_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _pod_item(sim, max={"cpu": "3"})
    body = status_of(lambda: core.create_namespaced_pod("ml", _two(("2", "1200m"))), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum cpu usage per Pod is 3, but limit is 3200m'
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == []
    core.create_namespaced_pod("ml", _two(("2", "1")))  # exactly the max


def test_the_pods_gpu_sum_over_the_pod_max_is_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _pod_item(sim, max={GPU: "8"})
    body = status_of(lambda: core.create_namespaced_pod("ml", _two(("1", "1"), gpus=(8, 1))), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum nvidia.com/gpu usage per Pod is 8, but limit is 9'


def test_a_pod_max_needs_some_container_to_set_a_limit(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _pod_item(sim, max={GPU: "8"})
    body = status_of(lambda: core.create_namespaced_pod("ml", pod(gpus=None)), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum nvidia.com/gpu usage per Pod is 8.  No limit is specified'


def test_the_pods_memory_sum_under_the_pod_min_is_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _pod_item(sim, min={"memory": "4Gi"})
    body = status_of(lambda: core.create_namespaced_pod("ml", _two(("1", "1"), memory=("2Gi", "1Gi"))), 403)
    assert body["message"] == 'pods "p" is forbidden: minimum memory usage per Pod is 4Gi, but request is 3Gi'


def test_the_pods_limit_to_request_ratio(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Summed first, then divided: main 1 → 4 (ratio 4) and sidecar 1 → 1 give the pod 5 / 2 = 2.5 > 2."""
    _pod_item(sim, maxLimitRequestRatio={"cpu": "2"})
    body = _two(("1", "1"))
    body["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4"
    status = status_of(lambda: core.create_namespaced_pod("ml", body), 403)
    assert status["message"] == ('pods "p" is forbidden: cpu max limit to request ratio per Pod is 2, '
                                 'but provided ratio is 2.500000')


def test_sidecars_add_to_the_sum_and_an_init_container_counts_with_the_sidecars_before_it(
        sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """podLimits: containers 2 + sidecar 1 = 3; a plain init container of 2.5 after the sidecar needs 3.5."""
    _pod_item(sim, max={"cpu": "3"})
    body = _two(("1", "1"))
    body["spec"]["initContainers"] = [
        {"name": "proxy", "image": "busybox", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]
    core.create_namespaced_pod("ml", body)
    late = _two(("1", "1"), name="q")
    late["spec"]["initContainers"] = [
        *body["spec"]["initContainers"],
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "2500m"}, "limits": {"cpu": "2500m"}}}]
    status = status_of(lambda: core.create_namespaced_pod("ml", late), 403)
    assert status["message"] == 'pods "q" is forbidden: maximum cpu usage per Pod is 3, but limit is 3500m'


def test_a_resize_that_takes_the_pods_sum_past_the_pod_max_is_403(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _pod_item(sim, max={"cpu": "3"})
    core.create_namespaced_pod("ml", _two(("2", "1")))
    sim.settle()
    patch = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2200m"},
                                                                    "limits": {"cpu": "2200m"}}}]}}
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", patch), 403)
    assert body["message"] == 'pods "p" is forbidden: maximum cpu usage per Pod is 3, but limit is 3200m'
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["cpu"] == "2"
