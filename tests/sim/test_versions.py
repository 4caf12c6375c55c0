"""The release the embedded cluster plays (`SimCluster(kube_version=…)`, `reactor sim --kube-version`).

Each difference names the upstream release and KEP (reactor_sim/versions.py):
- /version: version.Info of v1.<minor>.0.
- pods/resize (KEP-1287): pkg/registry/core/rest/storage_core.go registers it only with InPlacePodVerticalScaling
  on, by default from v1.33; below, discovery lists no pods/resize and a request to it is the unknown-path 404.
- Sidecars (KEP-753): SidecarContainers on by default from v1.29; at v1.28 pkg/api/pod/util.go
  dropDisabledFields drops an init container's restartPolicy. Quota counts a sidecar in the pod's sum
  (k8s.io/component-helpers/resource/helpers.go PodRequests).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from reactor_sim import SimCluster
from reactor_sim.versions import MODELLED, NEWEST
from tests.sim.builders import deployment, gpu_node, pod
from tests.sim.helpers import send

NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}


@pytest.fixture(params=MODELLED)
def played(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    with SimCluster(kube_version=request.param).start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.apply(gpu_node())
        yield cluster


def _get(sim: SimCluster, path: str) -> Any:
    with urllib.request.urlopen(sim.url + path) as answer:
        return json.loads(answer.read())


def _patch(sim: SimCluster, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return send(sim, "PATCH", path, body, "application/strategic-merge-patch+json")


def test_the_newest_modelled_release_is_the_default() -> None:
    assert SimCluster().version.minor == int(NEWEST.split(".")[1]) == 35


def test_a_release_not_modelled_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Kubernetes '1.30' is not modelled: choose one of 1.28, 1.32, 1.33, 1.35"):
        SimCluster(kube_version="1.30")


def test_version_says_the_release(played: SimCluster) -> None:
    info = _get(played, "/version")
    minor = played.version.minor
    assert (info["major"], info["minor"], info["gitVersion"]) == ("1", str(minor), f"v1.{minor}.0")
    assert {"gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"} <= set(info)


def test_discovery_lists_pods_resize_from_1_33(played: SimCluster) -> None:
    names = {r["name"] for r in _get(played, "/api/v1")["resources"]}
    assert "pods/status" in names
    assert ("pods/resize" in names) is (played.version.minor >= 33)


def test_a_resize_below_1_33_is_the_unknown_path_404_and_changes_nothing(played: SimCluster) -> None:
    played.apply(pod(gpus=None, containers=[{"name": "main", "image": "img:1", "resources": {
        "requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]))
    played.settle()
    body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}
    code, answer = _patch(played, "/api/v1/namespaces/ml/pods/p/resize", body)
    if played.version.minor >= 33:
        assert code == 200 and answer["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"
        return
    assert (code, answer) == (404, NOT_FOUND), "not `pods \"p\" not found`: the pod is there, the path is not"
    assert played.get("pods", "ml", "p")["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"


def _with_sidecar() -> dict[str, Any]:
    body = deployment(gpus=None, containers=[{"name": "main", "image": "img:1", "resources": {
        "requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}])
    body["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}}]
    return body


def test_sidecars_are_kept_from_1_29_and_dropped_at_1_28(played: SimCluster) -> None:
    played.apply(_with_sidecar())
    init = played.get("deployments", "ml", "web")["spec"]["template"]["spec"]["initContainers"][0]
    assert ("restartPolicy" in init) is (played.version.minor >= 29)


def test_quota_sums_a_sidecar_with_the_containers(played: SimCluster) -> None:
    """1.29+: main 1 + sidecar 0.5 = 1.5 CPU; 1.28: an ordinary init container, max(1, 0.5) = 1."""
    played.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
                  "spec": {"hard": {"requests.cpu": "10"}}})
    played.apply(_with_sidecar())
    played.settle()
    used = played.get("resourcequotas", "ml", "q")["status"]["used"]["requests.cpu"]
    assert used == ("1500m" if played.version.minor >= 29 else "1")


def test_the_kubelet_reports_what_its_release_reports(played: SimCluster) -> None:
    """containerStatuses[].resources only with in-place resize on (1.33+; dropDisabledPodStatusFields drops it
    otherwise); the PodReadyToStartContainers condition from 1.29 (beta, on by default)."""
    played.apply(pod())
    played.settle()
    status = played.get("pods", "ml", "p")["status"]
    assert status["phase"] == "Running"
    assert ("resources" in status["containerStatuses"][0]) is played.version.serves_resize
    kinds = {c["type"] for c in status["conditions"]}
    assert ("PodReadyToStartContainers" in kinds) is (played.version.minor >= 29)


def _resize_cpu(sim: SimCluster, cpu: str) -> tuple[int, Any]:
    body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}
    return _patch(sim, "/api/v1/namespaces/ml/pods/p/resize", body)


def _cpu_pod() -> dict[str, Any]:
    return pod(gpus=None, containers=[{"name": "main", "image": "img:1", "resources": {
        "requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}])


def test_1_32_with_the_gate_on_serves_resize_and_answers_in_status_resize() -> None:
    """v1.32, InPlacePodVerticalScaling turned on: pods/resize is served (it came with 1.32, behind the gate) and
    the verdict is `status.resize` (MarkPodProposedForResize: Proposed; the kubelet: InProgress, then cleared)."""
    with SimCluster(kube_version="1.32", feature_gates={"InPlacePodVerticalScaling": True}).start() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        sim.apply(gpu_node())
        assert "pods/resize" in {r["name"] for r in _get(sim, "/api/v1")["resources"]}
        sim.apply(_cpu_pod())
        sim.settle()
        code, answer = _resize_cpu(sim, "2")
        assert code == 200 and answer["status"]["resize"] == "Proposed"
        assert not [c for c in answer["status"]["conditions"] if c["type"].startswith("PodResize")]
        with sim.store.lock:
            sim.controllers.run_once()  # one kubelet sync: allocated
        assert sim.get("pods", "ml", "p")["status"]["resize"] == "InProgress"
        sim.settle()
        status = sim.get("pods", "ml", "p")["status"]
        assert "resize" not in status and status["containerStatuses"][0]["resources"]["limits"]["cpu"] == "2"
        code, answer = _resize_cpu(sim, "100")
        sim.settle()
        assert sim.get("pods", "ml", "p")["status"]["resize"] == "Infeasible"


def test_1_33_with_the_gate_off_serves_no_resize() -> None:
    with SimCluster(kube_version="1.33", feature_gates={"InPlacePodVerticalScaling": False}).start() as sim:
        assert "pods/resize" not in {r["name"] for r in _get(sim, "/api/v1")["resources"]}


def test_only_the_in_place_gate_is_modelled() -> None:
    with pytest.raises(ValueError, match="feature gate 'SidecarContainers' is not modelled"):
        SimCluster(feature_gates={"SidecarContainers": False})


@pytest.mark.parametrize(("version", "refused"), [("1.33", True), ("1.35", False)])
def test_lowering_a_memory_limit_in_place_is_refused_by_1_33_only(version: str, refused: bool) -> None:
    """v1.33 ValidatePodResize: "memory limits cannot be decreased unless resizePolicy is RestartContainer";
    v1.34 lifted it (kubernetes#133012)."""
    with SimCluster(kube_version=version).start() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        sim.apply(gpu_node())
        sim.apply(pod(gpus=None, containers=[{"name": "main", "image": "img:1", "resources": {
            "requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]))
        sim.settle()
        body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"memory": "1Gi"},
                                                                       "limits": {"memory": "1536Mi"}}}]}}
        code, answer = _patch(sim, "/api/v1/namespaces/ml/pods/p/resize", body)
        if not refused:
            assert code == 200
            return
        assert (code, answer["reason"]) == (422, "Invalid")
        assert answer["message"] == ('Pod "p" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: '
                                     "memory limits cannot be decreased unless resizePolicy is RestartContainer")
        sim.apply(pod("q", gpus=None, containers=[{"name": "main", "image": "img:1", "resources": {
            "requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}]))
        sim.settle()
        assert _patch(sim, "/api/v1/namespaces/ml/pods/q/resize", body)[0] == 200, "RestartContainer may lower it"
