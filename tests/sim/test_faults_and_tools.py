"""Injected faults, manifests loading, and kubectl against the simulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import urllib3
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import deployment
from tests.sim.helpers import status_of


def test_injected_503_answers_a_status_body_then_recovers(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """mode=status: the next matching request gets that code with a Status body; the one after succeeds."""
    apps.create_namespaced_deployment("ml", deployment())
    sim.inject_fault(verb="patch", resource="deployments", status=503)
    body = status_of(lambda: apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}}), 503)
    assert body["reason"] == "ServiceUnavailable"
    assert apps.read_namespaced_deployment("web", "ml").spec.replicas == 1
    assert apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}}).spec.replicas == 2


def test_injected_429_carries_retry_after(sim: SimCluster) -> None:
    """429 TooManyRequests with a Retry-After header and details.retryAfterSeconds."""
    sim.inject_fault(verb="list", resource="deployments", status=429, retry_after=3)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{sim.url}/apis/apps/v1/namespaces/ml/deployments")
    assert info.value.code == 429 and info.value.headers["Retry-After"] == "3"
    body = json.loads(info.value.read())
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3


def test_official_client_retries_a_get_on_429_with_retry_after(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """The client's urllib3 honours Retry-After on 429 for GET: the caller never sees the first answer."""
    sim.inject_fault(verb="list", resource="deployments", status=429, retry_after=0)
    apps.list_namespaced_deployment("ml")
    assert sim.requests[("list", "deployments", "")] == 2


def test_fault_matches_only_its_verb_and_resource(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """A fault for patch deployments leaves gets and other resources alone, and `count` bounds it."""
    apps.create_namespaced_deployment("ml", deployment())
    sim.inject_fault(verb="patch", resource="deployments", subresource="", status=500, count=2)
    apps.read_namespaced_deployment("web", "ml")
    for _ in range(2):
        status_of(lambda: apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}}), 500)
    apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}})


def test_timeout_fault_outlasts_the_client_timeout(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """mode=timeout holds the request past the client's read timeout (a real timeout for the caller)."""
    apps.create_namespaced_deployment("ml", deployment())
    sim.inject_fault(verb="patch", resource="deployments", mode="timeout", delay=1.0)
    start = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}}, _request_timeout=0.3)
    assert time.monotonic() - start < 1.0


def test_drop_fault_closes_the_connection_without_an_answer(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """mode=drop closes the connection: a POST (not retried by urllib3) fails with a protocol error."""
    sim.inject_fault(verb="create", resource="deployments", mode="drop")
    with pytest.raises(urllib3.exceptions.HTTPError):
        apps.create_namespaced_deployment("ml", deployment())
    assert sim.requests[("create", "deployments", "")] == 1


def test_load_manifests_orders_namespaces_first_and_stores_unknown_kinds(sim: SimCluster) -> None:
    """Multi-document YAML: namespaces are created before their contents; unknown kinds are stored."""
    docs = sim.load_manifests("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: team}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec: {containers: [{name: main, image: x}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: gpu, namespace: team}
spec: {groups: []}
""")
    assert [d["kind"] for d in docs] == ["Namespace", "Deployment", "PrometheusRule"]
    assert sim.get("prometheusrules", "team", "gpu")["spec"] == {"groups": []}


def test_load_manifests_rejects_documents_without_kind(sim: SimCluster) -> None:
    """A document without apiVersion/kind is a clear ValueError."""
    with pytest.raises(ValueError, match="needs apiVersion and kind"):
        sim.load_manifests("metadata: {name: x}\n---\nfoo: 1\n")


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_get_describe_and_patch(sim: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kubectl with the simulator's kubeconfig: `get deploy -n ml`, `describe`, and `patch` work."""
    sim.apply(deployment(replicas=2))
    sim.settle()
    config = sim.write_kubeconfig(tmp_path / "kubeconfig", token="t")

    def kubectl(*args: str) -> str:
        done = subprocess.run([KUBECTL, "--kubeconfig", config, *args], capture_output=True, text=True, timeout=20)
        assert done.returncode == 0, done.stderr
        return done.stdout
    assert "web" in kubectl("get", "deploy", "-n", "ml")
    assert "Replicas:" in kubectl("describe", "deployment", "web", "-n", "ml")
    kubectl("patch", "deploy", "web", "-n", "ml", "-p", '{"spec":{"replicas":3}}')
    assert sim.get("deployments", "ml", "web")["spec"]["replicas"] == 3
