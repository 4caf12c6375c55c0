"""The JobSet validating webhook as the embedded cluster plays it (issue 17), over HTTP with the JobSet CRD.

Upstream: kubernetes-sigs/jobset `pkg/webhooks/jobset_webhook.go` ValidateUpdate (webhook `vjobset.kb.io`):
`spec.replicatedJobs` is immutable (apimachinery ValidateImmutableField), except that while the old or the new
JobSet is suspended the pod templates' labels, annotations, nodeSelector, tolerations and schedulingGates may
change (for Kueue); `spec.managedBy` is immutable. v0.12.0 returns apierrors.NewInvalid (issue 24 item 7): 422
Invalid with its details, which kube-apiserver keeps (webhookerrors.ToStatusErr), the message prefixed with
`admission webhook "vjobset.kb.io" denied the request: `. Metadata (labels such as Kueue's) is never validated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reactor_sim import SimCluster

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
ARGS = ("jobset.x-k8s.io", "v1alpha2", "ml", "jobsets", "train")
DENIED = ('admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "train" is invalid: '
          'spec.replicatedJobs: Invalid value: ')


def _jobset(suspend: bool = False) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "priorityClassName": "medium-priority-gpu",
           "containers": [{"name": "trainer", "image": "registry.example.com/train:1",
                           "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"suspend": suspend, "replicatedJobs": [
                {"name": "workers", "replicas": 2,
                 "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}}}}]}}


@pytest.fixture
def custom(sim: SimCluster, client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    sim.load_manifests(CRDS / "jobset.x-k8s.io_jobsets.yaml")
    return k8s.CustomObjectsApi(client)


def _patch(custom: k8s.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    written: dict[str, Any] = custom.patch_namespaced_custom_object(
        *ARGS, body, _content_type="application/merge-patch+json")
    return written


def _jobs(custom: k8s.CustomObjectsApi) -> list[dict[str, Any]]:
    return custom.get_namespaced_custom_object(*ARGS)["spec"]["replicatedJobs"]


def _with_pod(jobs: list[dict[str, Any]], **pod_spec: Any) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(jobs))
    out[0]["template"]["spec"]["template"]["spec"].update(pod_spec)
    return out


@pytest.mark.parametrize("change", ["resources", "priority", "replicas"])
def test_a_running_jobsets_replicated_jobs_are_immutable(custom: k8s.CustomObjectsApi, change: str) -> None:
    custom.create_namespaced_custom_object(*ARGS[:4], _jobset())
    jobs = _jobs(custom)
    if change == "resources":
        changed = _with_pod(jobs, containers=[dict(jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0],
                                                   resources={"limits": {"nvidia.com/gpu": "4"},
                                                              "requests": {"nvidia.com/gpu": "4"}})])
    elif change == "priority":
        changed = _with_pod(jobs, priorityClassName="high-priority-gpu")
    else:
        changed = json.loads(json.dumps(jobs))
        changed[0]["replicas"] = 1
    with pytest.raises(ApiException) as e:
        _patch(custom, {"spec": {"replicatedJobs": changed}})
    status = json.loads(e.value.body)
    assert (e.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(DENIED) and status["message"].endswith(": field is immutable"), status
    assert (status["details"]["kind"], status["details"]["group"], status["details"]["name"]) == (
        "JobSet", "jobset.x-k8s.io", "train")
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.replicatedJobs"]
    assert _jobs(custom) == jobs


def test_even_suspended_only_scheduling_fields_of_the_pod_template_may_change(custom: k8s.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*ARGS[:4], _jobset(suspend=True))
    jobs = _jobs(custom)
    scheduling = _with_pod(jobs, nodeSelector={"gpu": "h100"}, tolerations=[{"key": "gpu", "operator": "Exists"}],
                           schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    scheduling[0]["template"]["spec"]["template"]["metadata"] = {"labels": {"kueue.x-k8s.io/podset": "workers"}}
    written = _patch(custom, {"spec": {"replicatedJobs": scheduling}})
    assert written["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "gpu": "h100"}
    with pytest.raises(ApiException) as e:
        _patch(custom, {"spec": {"replicatedJobs": _with_pod(scheduling, priorityClassName="high-priority-gpu")}})
    assert e.value.status == 422 and DENIED in json.loads(e.value.body)["message"]


def test_metadata_and_suspend_are_not_the_webhooks_business(custom: k8s.CustomObjectsApi) -> None:
    """Kueue's priority-class label lives in metadata, which ValidateUpdate does not look at; suspend may flip."""
    custom.create_namespaced_custom_object(*ARGS[:4], _jobset())
    written = _patch(custom, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "wpc-high"}},
                              "spec": {"suspend": True}})
    assert written["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert written["spec"]["suspend"] is True


def test_managed_by_is_immutable(custom: k8s.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*ARGS[:4], _jobset())
    with pytest.raises(ApiException) as e:
        _patch(custom, {"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})
    assert e.value.status == 422 and "spec.managedBy: Invalid value: " in json.loads(e.value.body)["message"]
