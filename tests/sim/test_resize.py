"""In-place pod resize: the `pods/<name>/resize` subresource (beta in 1.33, GA in 1.35).

Upstream: podResizeStrategy (pkg/registry/core/pod/strategy.go) keeps only containers[*].resources and
resizePolicy from the request and drops every other change; ValidatePodResize
(pkg/apis/core/validation/validation.go) then refuses what may not change, as a 422 Invalid.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, pod
from tests.sim.helpers import status_of

ONLY_CPU_MEMORY = 'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable'
CONFLICT = ('Operation cannot be fulfilled on pods "p": the object has been modified; '
            "please apply your changes to the latest version and try again")


def _pod(requests: dict[str, str], limits: dict[str, str], **spec: Any) -> dict[str, Any]:
    """Pod `p` in `ml` with one container `main` holding one GPU and the given cpu/memory."""
    body = pod(**spec)
    body["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1", **requests}, "limits": {GPU: "1", **limits}}
    return body


def _burstable() -> dict[str, Any]:
    return _pod({"cpu": "500m", "memory": "256Mi"}, {"cpu": "1", "memory": "512Mi"})


def _resources(patch: dict[str, Any], name: str = "main") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, "resources": patch}]}}


def _running(sim: SimCluster, core: k8s.CoreV1Api, body: dict[str, Any]) -> k8s.V1Pod:
    core.create_namespaced_pod("ml", body)
    sim.settle()
    got = core.read_namespaced_pod(body["metadata"]["name"], "ml")
    assert got.status.phase == "Running"
    return got


def test_cpu_and_memory_resize_through_the_client_is_stored_and_reported(sim: SimCluster,
                                                                          core: k8s.CoreV1Api) -> None:
    """PATCH pods/p/resize (strategic merge, CoreV1Api.patch_namespaced_pod_resize): cpu and memory
    requests and limits change in place; the pod keeps its uid, the resourceVersion moves, the GPU stays,
    and the kubelet then reports the new values in status.containerStatuses[*].resources."""
    before = _running(sim, core, _burstable())
    assert before.status.container_statuses[0].resources.limits == {GPU: "1", "cpu": "1", "memory": "512Mi"}
    got = core.patch_namespaced_pod_resize("p", "ml", _resources(
        {"requests": {"cpu": "750m", "memory": "384Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}))
    assert got.spec.containers[0].resources.requests == {GPU: "1", "cpu": "750m", "memory": "384Mi"}
    assert got.spec.containers[0].resources.limits == {GPU: "1", "cpu": "2", "memory": "1Gi"}
    assert got.metadata.uid == before.metadata.uid
    assert int(got.metadata.resource_version) > int(before.metadata.resource_version)
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits["cpu"] == "2"
    assert core.read_namespaced_pod_resize("p", "ml").spec.containers[0].resources.requests["cpu"] == "750m"
    sim.settle()
    status = core.read_namespaced_pod("p", "ml").status
    assert status.container_statuses[0].resources.limits == {GPU: "1", "cpu": "2", "memory": "1Gi"}
    assert status.qos_class == "Burstable"


def test_resize_takes_merge_patch_json_patch_and_put(core: k8s.CoreV1Api) -> None:
    """The resize subresource takes every patch type and PUT (replace_namespaced_pod_resize)."""
    core.create_namespaced_pod("ml", _burstable())
    merged = {"spec": {"containers": [{"name": "main", "image": "img:1", "resources": {
        "requests": {GPU: "1", "cpu": "600m", "memory": "256Mi"},
        "limits": {GPU: "1", "cpu": "1", "memory": "512Mi"}}}]}}
    got = core.patch_namespaced_pod_resize("p", "ml", merged, _content_type="application/merge-patch+json")
    assert got.spec.containers[0].resources.requests["cpu"] == "600m"
    got = core.patch_namespaced_pod_resize("p", "ml", [
        {"op": "replace", "path": "/spec/containers/0/resources/requests/memory", "value": "300Mi"}])
    assert got.spec.containers[0].resources.requests["memory"] == "300Mi"
    current = core.read_namespaced_pod_resize("p", "ml")
    current.spec.containers[0].resources.limits["cpu"] = "3"
    got = core.replace_namespaced_pod_resize("p", "ml", current)
    assert got.spec.containers[0].resources.limits["cpu"] == "3"


def test_gpu_change_through_resize_is_422_only_cpu_and_memory(core: k8s.CoreV1Api) -> None:
    """An extended resource (nvidia.com/gpu) through resize: 422 Invalid,
    `spec: Forbidden: only cpu and memory resources are mutable`, details.kind `Pod`; nothing stored."""
    core.create_namespaced_pod("ml", _burstable())
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _resources(
        {"requests": {GPU: "2"}, "limits": {GPU: "2"}})), 422)
    assert body["reason"] == "Invalid"
    assert body["message"] == ONLY_CPU_MEMORY
    assert body["details"] == {"name": "p", "kind": "Pod", "causes": [
        {"reason": "FieldValueForbidden", "message": "Forbidden: only cpu and memory resources are mutable",
         "field": "spec"}]}
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.limits[GPU] == "1"


def test_gpu_change_with_cpu_change_is_refused_whole(core: k8s.CoreV1Api) -> None:
    """A resize that changes cpu and the GPU together is refused as a whole (422): the cpu does not move."""
    core.create_namespaced_pod("ml", _burstable())
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _resources(
        {"requests": {GPU: "2", "cpu": "600m"}, "limits": {GPU: "2"}})), 422)
    assert body["message"] == ONLY_CPU_MEMORY
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.requests["cpu"] == "500m"


def test_qos_class_change_through_resize_is_422(core: k8s.CoreV1Api) -> None:
    """A Guaranteed pod resized to requests below limits would become Burstable: 422,
    `spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing`."""
    core.create_namespaced_pod("ml", _pod({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}))
    assert core.read_namespaced_pod("p", "ml").status.qos_class == "Guaranteed"
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _resources(
        {"requests": {"cpu": "500m"}})), 422)
    assert body["message"] == ('Pod "p" is invalid: spec: Invalid value: "Guaranteed": '
                               "Pod QOS Class may not change as a result of resizing")
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec", "message":
                                          'Invalid value: "Guaranteed": Pod QOS Class may not change as a result '
                                          "of resizing"}]
    got = core.patch_namespaced_pod_resize("p", "ml", _resources(
        {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}))
    assert got.spec.containers[0].resources.limits["cpu"] == "2" and got.status.qos_class == "Guaranteed"


def test_removing_a_request_through_resize_is_422(core: k8s.CoreV1Api) -> None:
    """Requests and limits may change but not be removed:
    `spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed`."""
    core.create_namespaced_pod("ml", _pod({"cpu": "500m", "memory": "256Mi"}, {"memory": "512Mi"}))
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", [
        {"op": "remove", "path": "/spec/containers/0/resources/requests/cpu"}]), 422)
    assert body["message"] == ('Pod "p" is invalid: spec.containers[0].resources.requests: Forbidden: '
                               "resource requests cannot be removed")


def test_non_resource_changes_through_resize_are_dropped(core: k8s.CoreV1Api) -> None:
    """podResizeStrategy keeps only containers' resources from the request: an image, a label or
    priorityClassName sent to resize is silently dropped (200), while the cpu change in it applies."""
    core.create_namespaced_pod("ml", _burstable())
    got = core.patch_namespaced_pod_resize("p", "ml", {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"priorityClassName": "x", "containers": [
            {"name": "main", "image": "img:2", "resources": {"requests": {"cpu": "600m"}}}]}})
    assert got.spec.containers[0].resources.requests["cpu"] == "600m"
    assert got.spec.containers[0].image == "img:1"
    assert got.spec.priority_class_name is None and not got.metadata.labels


@pytest.mark.parametrize("patch", [
    {"spec": {"containers": [{"name": "side", "image": "img:1"}]}},
    {"spec": {"containers": [{"name": "main", "resizePolicy": [
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}]}},
], ids=["add-container", "resize-policy"])
def test_container_changes_other_than_cpu_memory_through_resize_are_422(core: k8s.CoreV1Api,
                                                                         patch: dict[str, Any]) -> None:
    """Adding a container, or changing resizePolicy (immutable since 1.33), through resize: 422
    `spec: Forbidden: only cpu and memory resources are mutable`."""
    core.create_namespaced_pod("ml", _burstable())
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", patch), 422)
    assert body["message"] == ONLY_CPU_MEMORY and body["details"]["kind"] == "Pod"
    assert len(core.read_namespaced_pod("p", "ml").spec.containers) == 1


def test_plain_pod_patch_still_refuses_a_cpu_change(core: k8s.CoreV1Api) -> None:
    """The main pods/<name> endpoint still refuses resource changes (ValidatePodUpdate): 422 Forbidden."""
    core.create_namespaced_pod("ml", _burstable())
    body = status_of(lambda: core.patch_namespaced_pod("p", "ml", _resources({"requests": {"cpu": "600m"}})), 422)
    assert body["message"].startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields')


def test_stale_resource_version_on_resize_is_409(core: k8s.CoreV1Api) -> None:
    """Optimistic concurrency on resize: a stale metadata.resourceVersion (patch or PUT) is 409 Conflict."""
    created = core.create_namespaced_pod("ml", _burstable())
    core.patch_namespaced_pod_resize("p", "ml", _resources({"requests": {"cpu": "600m"}}))
    stale = {"metadata": {"resourceVersion": created.metadata.resource_version},
             **_resources({"requests": {"cpu": "700m"}})}
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", stale), 409)
    assert body["reason"] == "Conflict" and body["message"] == CONFLICT
    assert body["details"] == {"name": "p", "kind": "pods"}
    created.spec.containers[0].resources.requests["cpu"] = "700m"
    status_of(lambda: core.replace_namespaced_pod_resize("p", "ml", created), 409)
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.requests["cpu"] == "600m"


def test_resize_on_a_node_that_reports_no_resources_is_422(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """A running container whose status carries no `resources` means a kubelet without resize support:
    `spec: Forbidden: Pod running on node without support for resize`."""
    _running(sim, core, _burstable())
    core.patch_namespaced_pod_status("p", "ml", {"status": {"containerStatuses": [
        {"name": "main", "resources": None}]}})
    body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _resources({"requests": {"cpu": "600m"}})),
                     422)
    assert body["message"] == 'Pod "p" is invalid: spec: Forbidden: Pod running on node without support for resize'


def test_resize_dry_run_stores_nothing(core: k8s.CoreV1Api) -> None:
    """dryRun=All on resize answers the resized pod and stores nothing."""
    core.create_namespaced_pod("ml", _burstable())
    got = core.patch_namespaced_pod_resize("p", "ml", _resources({"requests": {"cpu": "600m"}}), dry_run="All")
    assert got.spec.containers[0].resources.requests["cpu"] == "600m"
    assert core.read_namespaced_pod("p", "ml").spec.containers[0].resources.requests["cpu"] == "500m"


def _http(sim: SimCluster, method: str, path: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(sim.url + path, method=method)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_discovery_lists_pods_resize_and_other_verbs_are_405(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """/api/v1 lists `pods/resize` (kind Pod, verbs get/patch/update); POST or DELETE on it is 405."""
    code, doc = _http(sim, "GET", "/api/v1")
    entry = next(r for r in doc["resources"] if r["name"] == "pods/resize")
    assert code == 200 and entry["kind"] == "Pod" and entry["namespaced"] is True
    assert sorted(entry["verbs"]) == ["get", "patch", "update"]
    core.create_namespaced_pod("ml", _burstable())
    for method in ("POST", "DELETE"):
        code, body = _http(sim, method, "/api/v1/namespaces/ml/pods/p/resize")
        assert code == 405 and body["reason"] == "MethodNotAllowed"
    assert core.read_namespaced_pod("p", "ml").metadata.name == "p"


# -- RBAC ---------------------------------------------------------------------------------------

USER, TOKEN = "resizer", "resizer-token"


@pytest.fixture
def rbac_sim() -> Iterator[SimCluster]:
    with SimCluster(rbac=True).start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.apply(_burstable())
        cluster.add_token(TOKEN, user=USER)
        yield cluster


def _grant(sim: SimCluster, resources: list[str]) -> None:
    rbac = "rbac.authorization.k8s.io"
    sim.apply({"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": "pods", "namespace": "ml"},
               "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["get", "patch", "update"]}]})
    sim.apply({"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": "pods", "namespace": "ml"},
               "subjects": [{"kind": "User", "apiGroup": rbac, "name": USER}],
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "pods"}})


def test_rbac_resize_needs_a_pods_resize_grant(rbac_sim: SimCluster) -> None:
    """RBAC: resize is authorized as subresource `pods/resize`; a grant on `pods` alone is a 403
    (`cannot patch resource "pods/resize"`), and adding `pods/resize` allows it."""
    config = k8s.Configuration(host=rbac_sim.url)
    config.api_key, config.api_key_prefix = {"BearerToken": TOKEN}, {"BearerToken": "Bearer"}
    _grant(rbac_sim, ["pods"])
    with k8s.ApiClient(config) as api_client:
        core = k8s.CoreV1Api(api_client)
        assert core.read_namespaced_pod("p", "ml").metadata.name == "p"
        body = status_of(lambda: core.patch_namespaced_pod_resize("p", "ml", _resources(
            {"requests": {"cpu": "600m"}})), 403)
        assert body["message"] == (f'pods "p" is forbidden: User "{USER}" cannot patch resource "pods/resize" '
                                   'in API group "" in the namespace "ml"')
        assert body["details"] == {"name": "p", "kind": "pods"}
        _grant(rbac_sim, ["pods", "pods/resize"])
        got = core.patch_namespaced_pod_resize("p", "ml", _resources({"requests": {"cpu": "600m"}}))
        assert got.spec.containers[0].resources.requests["cpu"] == "600m"
