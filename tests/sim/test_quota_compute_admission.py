"""ResourceQuota admission on Pod create for the lines beside the GPU's: CPU, memory and the pod count.

The contract (kube-apiserver pkg/quota/v1/evaluator/core/pods.go PodUsageFunc and podComputeUsageHelper, the
ResourceQuota admission plugin's CheckRequest): a new pod is charged 1 on `pods` and `count/pods`, its whole
requests on `cpu`/`requests.cpu` and `memory`/`requests.memory`, its whole limits on `limits.cpu`/`limits.memory`
(resourcehelper.PodRequests / PodLimits: containers and sidecars summed, each other init container by the max rule;
a limit without a request is the request too, SetDefaults_Pod), and refused 403 `exceeded quota: NAME, requested:
…, used: …, limited: …` naming the lines it exceeds. The reactor's quota checks for GPU changes rest on this.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import pod
from tests.sim.helpers import status_of


def _quota(sim: SimCluster, name: str, **hard: str) -> None:
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "ml"},
               "spec": {"hard": hard}})


def _with(body: dict[str, Any], *, cpu: str | None = None, limit: str | None = None, memory: str | None = None,
          init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    resources = body["spec"]["containers"][0]["resources"]
    if cpu is not None:
        resources.setdefault("requests", {})["cpu"] = cpu
    if limit is not None:
        resources.setdefault("limits", {})["cpu"] = limit
    if memory is not None:
        resources.setdefault("limits", {})["memory"] = memory
        resources.setdefault("requests", {})["memory"] = memory
    if init is not None:
        body["spec"]["initContainers"] = init
    return body


def test_a_pod_past_the_requests_cpu_line_is_refused_naming_it(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _quota(sim, "compute", **{"requests.cpu": "4"})
    core.create_namespaced_pod("ml", _with(pod("first"), cpu="3"))
    status = status_of(lambda: core.create_namespaced_pod("ml", _with(pod(), cpu="2")), 403)
    assert status["message"] == ('pods "p" is forbidden: exceeded quota: compute, requested: requests.cpu=2, '
                                 "used: requests.cpu=3, limited: requests.cpu=4")


def test_a_limit_alone_is_charged_as_the_request(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """SetDefaults_Pod copies the limit into the missing request before admission: `cpu` is charged 2."""
    _quota(sim, "compute", cpu="1")
    status = status_of(lambda: core.create_namespaced_pod("ml", _with(pod(), limit="2")), 403)
    assert "requested: cpu=2, used: cpu=0, limited: cpu=1" in status["message"]


def test_an_init_container_counts_by_the_max_rule_and_a_sidecar_is_summed(sim: SimCluster,
                                                                          core: k8s.CoreV1Api) -> None:
    """Container 1 core, sidecar 500m (summed: 1500m), a warm-up init container of 3 cores beside the sidecar
    started before it (3500m): the pod is charged max(1500m, 3500m)."""
    init = [{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}},
            {"name": "warmup", "image": "warmup:1", "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}]
    _quota(sim, "compute", **{"requests.cpu": "3400m"})
    status = status_of(lambda: core.create_namespaced_pod("ml", _with(pod(), cpu="1", limit="1", init=init)), 403)
    assert "requested: requests.cpu=3500m" in status["message"]
    _quota(sim, "compute", **{"requests.cpu": "3500m"})
    core.create_namespaced_pod("ml", _with(pod(), cpu="1", limit="1", init=init))
    assert core.read_namespaced_resource_quota("compute", "ml").status.used == {"requests.cpu": "3500m"}


def test_the_limits_memory_and_pods_lines_are_charged_too(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    _quota(sim, "mixed", **{"limits.memory": "8Gi", "pods": "1"})
    core.create_namespaced_pod("ml", _with(pod("first"), memory="6Gi"))
    status = status_of(lambda: core.create_namespaced_pod("ml", _with(pod(), memory="4Gi")), 403)
    assert status["message"] == ('pods "p" is forbidden: exceeded quota: mixed, requested: limits.memory=4Gi,pods=1, '
                                 "used: limits.memory=6Gi,pods=1, limited: limits.memory=8Gi,pods=1")
