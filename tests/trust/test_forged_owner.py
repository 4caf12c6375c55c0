"""Issue 12, attack 3: a tenant's pod that names another team's workload as its owner moves nothing.

The tenant (RBAC: create pods, get/patch Deployments) creates pods whose controller ownerReference
names the other team's Deployment `llm-inference` — directly, through its ReplicaSet with a wrong
uid, through its ReplicaSet with the right uid but labels its selector does not match, through a
Job that does not exist as such — and an alert fires on each. Every one is skipped
`owner-unverified`, and the other team's Deployment is not changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import GPU, template_of


def _replicaset(sim: SimCluster) -> dict[str, Any]:
    (rs,) = [r for r in sim.list("replicasets", NAMESPACE) if r["metadata"]["name"].startswith("llm-inference-")]
    return rs


def _forged_refs(sim: SimCluster) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    """Forgery name → (the ownerReference written on the tenant's pod, the pod's labels)."""
    deploy = sim.get("deployments", NAMESPACE, "llm-inference")
    rs = _replicaset(sim)
    rs_name = rs["metadata"]["name"]
    rs_labels = dict(rs["spec"]["template"]["metadata"]["labels"])

    def ref(kind: str, api: str, name: str, uid: str) -> dict[str, Any]:
        return {"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True}

    return {
        "pod-to-deployment-direct": (ref("Deployment", "apps/v1", "llm-inference", deploy["metadata"]["uid"]),
                                     {"app": "llm-inference"}),
        "replicaset-wrong-uid": (ref("ReplicaSet", "apps/v1", rs_name, "00000000-forged"), rs_labels),
        "replicaset-labels-not-selected": (ref("ReplicaSet", "apps/v1", rs_name, rs["metadata"]["uid"]),
                                           {"app": "team-b"}),
        "deployment-uid-on-replicaset": (ref("ReplicaSet", "apps/v1", rs_name, deploy["metadata"]["uid"]),
                                         rs_labels),
    }


def _tenant_pod(tenant: k8s.ApiClient, name: str, owner: dict[str, Any], labels: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "server", "image": "registry.example.com/team-b:1",
                                     "resources": {"limits": {GPU: "1"}, "requests": {GPU: "1"}}}]}}
    k8s.CoreV1Api(tenant).create_namespaced_pod(NAMESPACE, body)


FORGERIES = ("pod-to-deployment-direct", "replicaset-wrong-uid", "replicaset-labels-not-selected",
             "deployment-uid-on-replicaset")


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_owner_reference_is_not_believed(reactor: Reactor, sim: SimCluster, tenant: k8s.ApiClient,
                                                  forgery: str) -> None:
    owner, labels = _forged_refs(sim)[forgery]
    _tenant_pod(tenant, "team-b-worker", owner, labels)
    before = sim.get("deployments", NAMESPACE, "llm-inference")
    answer = reactor.post(notification([AlertSpec("GPUSaturated", NAMESPACE, "team-b-worker", "server", 0.99, 4)]))
    assert answer.status_code == 200
    (outcome,) = answer.get_json()["outcomes"]
    assert (outcome["result"], outcome["reason"]) == ("skipped", "owner-unverified"), outcome
    after = sim.get("deployments", NAMESPACE, "llm-inference")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"]["replicas"] == before["spec"]["replicas"]
    assert template_of(sim, "llm-inference") == before["spec"]["template"]["spec"]
    assert reactor.metric("reactor_alerts_skipped_total", reason="owner-unverified") == 1


def test_the_controllers_own_pods_still_resolve(reactor: Reactor, sim: SimCluster) -> None:
    """The same alert on a pod the ReplicaSet created acts on the Deployment (the chain is verified, not refused)."""
    pod = reactor.pods("llm-inference")[0]
    answer = reactor.post(notification([AlertSpec("GPUSaturated", NAMESPACE, pod, "server", 0.99, 4)]))
    (outcome,) = answer.get_json()["outcomes"]
    assert outcome["result"] == "applied", outcome
    assert sim.get("deployments", NAMESPACE, "llm-inference")["spec"]["replicas"] == 4
