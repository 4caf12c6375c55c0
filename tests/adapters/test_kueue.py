"""Kueue over HTTP with its CRDs installed (issues 17, 24): a workload with the queue-name label changes priority
through Kueue's priority-class label and WorkloadPriorityClasses, and grows only within its ClusterQueue's quota.

Which Kueue is installed decides what the label does: v0.14 and older serve only kueue.x-k8s.io/v1beta1 and keep the
label immutable (the reactor refuses by name); v0.15+ serve v1beta2 too, let it change, and copy it into a
Deployment's or LeaderWorkerSet's pod template, so the change rolls the pods and is checked for surge and quota."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.operators import GPU, container, install, kueue_deployment_webhook
from tests.adapters.workloads import kueue_queues
from tests.support import NAMESPACE, Reactor

LABELS = {"app": "queued", "kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"}


@pytest.fixture
def reactor(kueue_reactor: Reactor) -> Reactor:
    return kueue_reactor


KUEUE_V0_19 = "kueue.x-k8s.io-v1beta2.yaml"  # v1beta2 served: Kueue v0.15+
KUEUE_V0_11 = "kueue.x-k8s.io.yaml"  # v1beta1 only: Kueue v0.14 and older (v0.11.9, the last for Kubernetes 1.28)


@pytest.fixture
def queued(reactor: Reactor) -> None:
    _queued(reactor, KUEUE_V0_19)


def _queued(reactor: Reactor, crds: str, kind: str = "Deployment") -> None:
    sim = reactor.sim
    install(sim, crds)
    kueue_queues(sim, "kueue.x-k8s.io/v1beta1", quota=12)
    _cq_usage(sim, 8)
    sim.apply({"apiVersion": "apps/v1", "kind": kind,
               "metadata": {"name": "queued", "namespace": NAMESPACE, "labels": LABELS},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "queued"}},
                        **({"serviceName": ""} if kind == "StatefulSet" else {}),
                        "template": {"metadata": {"labels": {"app": "queued"}},
                                     "spec": {"priorityClassName": "medium-priority-gpu",
                                              "containers": [container("server", 4)]}}}})
    sim.settle()
    if kind == "Deployment":
        kueue_deployment_webhook(sim, "queued")


def _cq_usage(sim: SimCluster, used: int) -> None:
    res = sim.registry.by_plural("clusterqueues")
    with sim.store.lock:
        sim.api.patch(res, None, "gpu-cq", "application/merge-patch+json",
                      {"status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": GPU, "total": used}]}]}},
                      subresource="status")


def _post(reactor: Reactor, name: str, **kw: Any) -> list[dict[str, Any]]:
    body = notification([AlertSpec(name, NAMESPACE, p, "server", **kw) for p in reactor.pods("queued")])
    return reactor.post(body).get_json()["outcomes"]


def test_priority_goes_up_through_the_kueue_label_not_the_pods_class(reactor: Reactor, queued: None) -> None:
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "set-priority")}, outcomes
    deployment = reactor.sim.get("deployments", NAMESPACE, "queued")
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "medium-priority-gpu"
    # Kueue's webhook (played) copies the label into the pod template: the Deployment rolls, as the surge check
    # in the decision assumed.
    generation = deployment["metadata"]["generation"]
    kueue_deployment_webhook(reactor.sim, "queued")
    deployment = reactor.sim.get("deployments", NAMESPACE, "queued")
    assert deployment["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert deployment["metadata"]["generation"] == generation + 1


def test_on_kueue_v0_14_and_older_a_priority_change_is_refused_by_name(reactor: Reactor) -> None:
    """Issue 24 item 4: v1beta1 alone served; Kueue's webhook would refuse the label change (immutable)."""
    _queued(reactor, KUEUE_V0_11)
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {o["reason"] for o in outcomes} == {"operator-forbids"}, outcomes
    assert all("v0.14 and older" in o["detail"] for o in outcomes), outcomes
    deployment = reactor.sim.get("deployments", NAMESPACE, "queued")
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-low"
    events = [e for e in reactor.sim.list("events", NAMESPACE) if e["reason"] == "OperatorForbids"]
    assert len(events) == 1 and "immutable" in events[0]["message"], events


def test_a_kueue_managed_statefulsets_requests_are_not_touched(reactor: Reactor) -> None:
    """Kueue's StatefulSet webhook keeps a managed StatefulSet's pod requests immutable (v0.19.2
    statefulset_webhook ValidateUpdate → ValidateImmutablePodGroupPodSpec): refused by name, nothing written."""
    _queued(reactor, KUEUE_V0_19, kind="StatefulSet")
    before = reactor.sim.get("statefulsets", NAMESPACE, "queued")
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {o["reason"] for o in outcomes} == {"operator-forbids"}, outcomes
    assert all("ValidateImmutablePodGroupPodSpec" in o["detail"] for o in outcomes), outcomes
    assert reactor.sim.get("statefulsets", NAMESPACE, "queued")["spec"] == before["spec"]


def test_a_missing_workload_priority_class_is_refused(reactor: Reactor, queued: None) -> None:
    reactor.sim.delete("workloadpriorityclasses", None, "wpc-high")
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {o["reason"] for o in outcomes} == {"priority-class-missing"}, outcomes


def test_growth_must_fit_the_cluster_queue_not_only_the_namespace_quota(reactor: Reactor, queued: None) -> None:
    """12 nominal, 8 in use: 2 replicas × 4 → 5 GPUs needs 2 more plus a surge pod of 5 — 7 > 4 left. The
    namespace quota (64) alone would allow it."""
    outcomes = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)
    assert {o["reason"] for o in outcomes} == {"quota-exceeded"}, [o.get("detail") for o in outcomes]
    _cq_usage(reactor.sim, 0)
    outcomes = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, [o.get("detail") for o in outcomes]


def test_a_full_cluster_queue_refuses_a_priority_change_that_rolls_pods(reactor: Reactor, queued: None) -> None:
    """Kueue v0.15+ copies the label into the Deployment's pod template: the rollout's surge pod (25% of 2 → 1 × 4
    GPUs) needs room the ClusterQueue does not have."""
    _cq_usage(reactor.sim, 12)
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {o["reason"] for o in outcomes} == {"quota-exceeded"}, outcomes
    assert all("surge 1" in o["detail"] for o in outcomes), outcomes
    _cq_usage(reactor.sim, 8)
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "set-priority")}, outcomes


def test_a_queue_label_without_kueue_installed_is_no_api_error(reactor: Reactor) -> None:
    """No kueue.x-k8s.io served at all: the version probe answers "none" (not an API error), and a priority change
    is refused because no WorkloadPriorityClass exists."""
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "queued", "namespace": NAMESPACE, "labels": LABELS},
                       "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "queued"}},
                                "template": {"metadata": {"labels": {"app": "queued"}},
                                             "spec": {"priorityClassName": "medium-priority-gpu",
                                                      "containers": [container("server", 4)]}}}})
    reactor.sim.settle()
    assert {o["reason"] for o in _post(reactor, "GPUSaturated", value=0.99, gpus=4)} == {"priority-class-missing"}
