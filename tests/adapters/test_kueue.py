"""Kueue over HTTP with its CRDs installed (issue 17): a workload with the queue-name label changes priority
through Kueue's priority-class label and WorkloadPriorityClasses, and grows only within its ClusterQueue's quota."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import GPU, container, install
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

LABELS = {"app": "queued", "kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"}


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, make_settings(token_file, **{**POLICY, "priorityLadder": ["wpc-low", "wpc-high"]}))
    try:
        yield r
    finally:
        r.service.kube.close()


@pytest.fixture
def queued(reactor: Reactor) -> None:
    sim = reactor.sim
    install(sim, "kueue.x-k8s.io.yaml")
    for name, value in (("wpc-low", 100), ("wpc-high", 1000)):
        sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                   "metadata": {"name": name}, "value": value})
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
               "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                   {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 12}]}]}]}})
    _cq_usage(sim, 8)
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}})
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "queued", "namespace": NAMESPACE, "labels": LABELS},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "queued"}},
                        "template": {"metadata": {"labels": {"app": "queued"}},
                                     "spec": {"priorityClassName": "medium-priority-gpu",
                                              "containers": [container("server", 4)]}}}})
    sim.settle()


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
    assert deployment["metadata"]["generation"] == 1  # no template change: no rollout


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


def test_a_full_cluster_queue_still_allows_a_priority_change(reactor: Reactor, queued: None) -> None:
    """The label changes no pod: a ClusterQueue with no room left does not block it (growth would be refused)."""
    _cq_usage(reactor.sim, 12)
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "set-priority")}, outcomes
