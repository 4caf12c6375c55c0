"""Field validation the API server applies: pod immutability, Job template, extended resources."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.sim.builders import GPU, deployment, pod
from tests.sim.helpers import status_of

POD_FORBIDDEN = ('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
                 "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                 "`spec.tolerations` (only additions to existing tolerations),"
                 "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def _gpu_patch(limit: str, request: str | None = None) -> dict:  # type: ignore[type-arg]
    res = {"limits": {GPU: limit}}
    if request is not None:
        res["requests"] = {GPU: request}
    return {"spec": {"containers": [{"name": "main", "resources": res}]}}


def test_pod_gpu_change_is_422_forbidden_with_kind_in_details(core: k8s.CoreV1Api) -> None:
    """Changing a running pod's resources: 422 Invalid, `spec: Forbidden: pod updates may not change...`,
    details.kind is the Kind `Pod`."""
    core.create_namespaced_pod("ml", pod())
    body = status_of(lambda: core.patch_namespaced_pod("p", "ml", _gpu_patch("2", "2")), 422)
    assert body["reason"] == "Invalid"
    assert body["message"].startswith(POD_FORBIDDEN)
    assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "p"
    assert body["details"]["causes"][0]["field"] == "spec"
    assert body["details"]["causes"][0]["reason"] == "FieldValueForbidden"


def test_pod_priority_class_change_is_422(core: k8s.CoreV1Api) -> None:
    """priorityClassName is immutable on a pod: 422 Invalid."""
    core.create_namespaced_pod("ml", pod())
    status_of(lambda: core.patch_namespaced_pod("p", "ml", {"spec": {"priorityClassName": "x"}}), 422)


def test_pod_image_and_labels_may_change(core: k8s.CoreV1Api) -> None:
    """Images, activeDeadlineSeconds, added tolerations and metadata may change on a pod."""
    core.create_namespaced_pod("ml", pod())
    patched = core.patch_namespaced_pod("p", "ml", {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"activeDeadlineSeconds": 60, "tolerations": [{"key": "k", "operator": "Exists"}],
                 "containers": [{"name": "main", "image": "img:2"}]}})
    assert patched.spec.containers[0].image == "img:2" and patched.metadata.labels == {"a": "b"}


def test_job_template_is_immutable(client: k8s.ApiClient) -> None:
    """A Job's spec.template may not change: 422 `spec.template: Invalid value: ...: field is immutable`."""
    api = k8s.BatchV1Api(client)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}
    api.create_namespaced_job("ml", job)
    body = status_of(lambda: api.patch_namespaced_job("j", "ml", {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "j"}]}}}}), 422)
    assert body["message"].startswith('Job.batch "j" is invalid: spec.template: Invalid value: ')
    assert body["message"].endswith(": field is immutable")
    assert body["details"] == {"name": "j", "group": "batch", "kind": "Job", "causes": body["details"]["causes"]}


def test_pod_gpu_request_different_from_limit_is_422(core: k8s.CoreV1Api) -> None:
    """Extended resources: request must equal limit (`must be equal to nvidia.com/gpu limit of 2`)."""
    body = pod()
    body["spec"]["containers"][0]["resources"] = {"limits": {GPU: "2"}, "requests": {GPU: "1"}}
    status = status_of(lambda: core.create_namespaced_pod("ml", body), 422)
    assert status["message"] == ('Pod "p" is invalid: spec.containers[0].resources.requests: '
                                 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')


def test_pod_update_causes_come_in_validate_pod_update_order(core: k8s.CoreV1Api) -> None:
    """ValidatePodUpdate validates the new spec (validateResourceRequirements: Invalid on
    `spec.containers[0].resources.requests`, no `[resource]` key) before it forbids the spec change."""
    core.create_namespaced_pod("ml", pod())
    status = status_of(lambda: core.patch_namespaced_pod("p", "ml", _gpu_patch("2")), 422)
    assert [(c["reason"], c["field"]) for c in status["details"]["causes"]] == [
        ("FieldValueInvalid", "spec.containers[0].resources.requests"), ("FieldValueForbidden", "spec")]
    assert status["details"]["causes"][0]["message"] == 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'
    assert status["message"].startswith('Pod "p" is invalid: [spec.containers[0].resources.requests: Invalid value: '
                                        '"1": must be equal to nvidia.com/gpu limit of 2, spec: Forbidden: pod updates')


def test_pod_cpu_request_above_limit_is_422(core: k8s.CoreV1Api) -> None:
    """validateResourceRequirements: an overcommitable resource's request may not exceed its limit
    (`must be less than or equal to cpu limit of 500m`), also on `...resources.requests`."""
    body = pod()
    body["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}}
    status = status_of(lambda: core.create_namespaced_pod("ml", body), 422)
    assert status["message"] == ('Pod "p" is invalid: spec.containers[0].resources.requests: '
                                 'Invalid value: "1": must be less than or equal to cpu limit of 500m')


def test_pod_gpu_request_without_limit_is_422(core: k8s.CoreV1Api) -> None:
    """A request for an extended resource without a limit: `Limit must be set for non overcommitable resources`."""
    body = pod()
    body["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}}
    status = status_of(lambda: core.create_namespaced_pod("ml", body), 422)
    assert status["message"] == ('Pod "p" is invalid: spec.containers[0].resources.limits: Required value: '
                                 "Limit must be set for non overcommitable resources")


def test_pod_gpu_limit_alone_defaults_the_request(core: k8s.CoreV1Api) -> None:
    """A limit without a request: the request defaults to the limit."""
    body = pod()
    body["spec"]["containers"][0]["resources"] = {"limits": {GPU: "2"}}
    created = core.create_namespaced_pod("ml", body)
    assert created.spec.containers[0].resources.requests == {GPU: "2"}


def test_deployment_patch_changing_only_gpu_limit_is_422(apps: k8s.AppsV1Api) -> None:
    """A template patch that changes the limit of a container that has a request: 422 in the template."""
    apps.create_namespaced_deployment("ml", deployment())
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "resources": {"limits": {GPU: "2"}}}]}}}}
    status = status_of(lambda: apps.patch_namespaced_deployment("web", "ml", patch), 422)
    assert status["message"] == ('Deployment.apps "web" is invalid: spec.template.spec.containers[0].resources.'
                                 'requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')
    assert status["details"]["kind"] == "Deployment" and status["details"]["group"] == "apps"
    got = apps.read_namespaced_deployment("web", "ml").spec.template.spec.containers[0]
    assert got.resources.limits[GPU] == "1"


def test_cronjob_template_gpu_request_must_equal_limit(client: k8s.ApiClient) -> None:
    """CronJob jobTemplate pod specs get the same extended-resource validation (422)."""
    api = k8s.BatchV1Api(client)
    cj = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
          "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
              "restartPolicy": "Never", "containers": [{
                  "name": "c", "image": "i", "resources": {"limits": {GPU: "1"}, "requests": {GPU: "1"}}}]}}}}}}
    api.create_namespaced_cron_job("ml", cj)
    patch = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {GPU: "3"}}}]}}}}}}
    status = status_of(lambda: api.patch_namespaced_cron_job("c", "ml", patch), 422)
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.jobTemplate.spec.template.spec.containers[0].resources.requests",
        "message": 'Invalid value: "3": must be equal to nvidia.com/gpu limit of 1'}]


def test_deployment_selector_must_match_template_labels(apps: k8s.AppsV1Api) -> None:
    """`selector` does not match template `labels`: 422 on create."""
    body = deployment()
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    status = status_of(lambda: apps.create_namespaced_deployment("ml", body), 422)
    assert "`selector` does not match template `labels`" in status["message"]
