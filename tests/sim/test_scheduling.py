"""Scheduling as kube-scheduler and the node lifecycle controller do it: resources, taints and tolerations
(TaintToleration, NodeUnschedulable), the not-ready taint of a new Node (TaintNodesByCondition admission),
condition taints, NoExecute evictions, and no virtual node: with nothing that fits, a pod stays Pending."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.sim.builders import deployment, gpu_node, pod

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.fixture
def bare() -> Iterator[SimCluster]:
    """A cluster with namespace `ml` and no Node at all."""
    with build.start(build.namespace("ml"), settle=False) as cluster:
        yield cluster


@pytest.fixture
def core(bare: SimCluster) -> Iterator[k8s.CoreV1Api]:
    with k8s.ApiClient(k8s.Configuration(host=bare.url)) as api_client:
        yield k8s.CoreV1Api(api_client)


def _events(sim: SimCluster, name: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in sim.list("events", "ml") if e["involvedObject"]["name"] == name]


def _phase(sim: SimCluster, name: str = "p") -> tuple[str, str | None]:
    got = sim.get("pods", "ml", name)
    return got["status"].get("phase", ""), got["spec"].get("nodeName")


def test_with_no_node_at_all_pods_stay_pending(bare: SimCluster) -> None:
    """schedulePod with an empty snapshot: ErrNoNodesAvailable `no nodes available to schedule pods` as a
    FailedScheduling Event and PodScheduled=False/Unschedulable; the pod is not bound anywhere."""
    bare.apply(pod())
    bare.settle()
    got = bare.get("pods", "ml", "p")
    assert got["status"]["phase"] == "Pending" and "nodeName" not in got["spec"]
    assert [(c["type"], c["status"], c["reason"]) for c in got["status"]["conditions"]] == [
        ("PodScheduled", "False", "Unschedulable")]
    assert _events(bare, "p") == [("FailedScheduling", "no nodes available to schedule pods")]


def test_pods_bind_where_gpus_remain_and_the_rest_stay_pending(bare: SimCluster) -> None:
    """NodeResourcesFit: pods bind where nvidia.com/gpu allocatable remains; the rest stay Pending with
    `0/1 nodes are available: 1 Insufficient nvidia.com/gpu.`"""
    bare.apply([gpu_node("gpu-1", 2), deployment(replicas=3)])
    bare.settle()
    pods = bare.list("pods", "ml")
    assert sorted(p["status"]["phase"] for p in pods) == ["Pending", "Running", "Running"]
    pending = next(p for p in pods if p["status"]["phase"] == "Pending")
    assert "nodeName" not in pending["spec"]
    assert _events(bare, pending["metadata"]["name"]) == [
        ("FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")]


def test_a_new_node_carries_the_not_ready_taint_until_it_reports_ready(bare: SimCluster, core: k8s.CoreV1Api) -> None:
    """TaintNodesByCondition admission gives every new Node `node.kubernetes.io/not-ready:NoSchedule`; the
    scheduler's TaintToleration filter keeps pods off it (`node(s) had untolerated taint
    {node.kubernetes.io/not-ready: }`); once the kubelet reports Ready the node lifecycle controller removes it."""
    created = core.create_node(gpu_node("gpu-1", ready=None))
    assert [t.to_dict() for t in created.spec.taints] == [{**NOT_READY, "time_added": None, "value": None}]
    bare.apply(pod())
    bare.settle()
    assert _phase(bare) == ("Pending", None)
    assert _events(bare, "p") == [("FailedScheduling", "0/1 nodes are available: 1 node(s) had untolerated taint "
                                                       "{node.kubernetes.io/not-ready: }.")]
    core.patch_node_status("gpu-1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    bare.settle()
    assert core.read_node("gpu-1").spec.taints is None
    assert _phase(bare) == ("Running", "gpu-1")


@pytest.mark.parametrize(("status", "key"), [("False", "node.kubernetes.io/not-ready"),
                                              ("Unknown", "node.kubernetes.io/unreachable")],
                         ids=["not-ready", "unknown"])
def test_ready_condition_maps_to_its_no_schedule_taint(bare: SimCluster, core: k8s.CoreV1Api, status: str,
                                                       key: str) -> None:
    """doNoScheduleTaintingPass: Ready=False -> not-ready:NoSchedule, Ready=Unknown -> unreachable:NoSchedule
    (with timeAdded); Ready=True again removes it."""
    bare.apply(gpu_node("gpu-1"))
    bare.settle()
    core.patch_node_status("gpu-1", {"status": {"conditions": [{"type": "Ready", "status": status}]}})
    bare.settle()
    (taint,) = core.read_node("gpu-1").spec.taints
    assert (taint.key, taint.effect, taint.time_added is not None) == (key, "NoSchedule", True)
    core.patch_node_status("gpu-1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    bare.settle()
    assert core.read_node("gpu-1").spec.taints is None


@pytest.mark.parametrize(("toleration", "fits"), [
    ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "value": "gpu"}, True),  # no operator is Equal; no effect matches every effect
    ({"key": "dedicated", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),  # an empty key with Exists tolerates every taint
    ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, False),
    ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
], ids=["equal", "equal-by-default-any-effect", "exists", "empty-key-exists", "wrong-value", "wrong-effect",
        "wrong-key"])
def test_no_schedule_taint_admits_only_tolerating_pods(bare: SimCluster, toleration: dict[str, Any],
                                                      fits: bool) -> None:
    """Toleration.ToleratesTaint as the TaintToleration filter applies it to a `dedicated=gpu:NoSchedule` node."""
    bare.apply([gpu_node("gpu-1", taints=[DEDICATED]), pod(tolerations=[toleration])])
    bare.settle()
    assert _phase(bare) == (("Running", "gpu-1") if fits else ("Pending", None))
    if not fits:
        assert _events(bare, "p") == [("FailedScheduling", "0/1 nodes are available: 1 node(s) had untolerated taint "
                                                           "{dedicated: gpu}.")]


def test_prefer_no_schedule_never_blocks(bare: SimCluster) -> None:
    """The TaintToleration filter only counts NoSchedule and NoExecute taints."""
    bare.apply([gpu_node("gpu-1", taints=[{**DEDICATED, "effect": "PreferNoSchedule"}]), pod()])
    bare.settle()
    assert _phase(bare) == ("Running", "gpu-1")


def test_reasons_are_counted_per_node_and_sorted(bare: SimCluster) -> None:
    """FitError.Error: each node reports its first failing filter; `N reason` strings sorted, comma-joined."""
    bare.apply([gpu_node("a", taints=[DEDICATED]), gpu_node("b", taints=[DEDICATED]), gpu_node("c", gpus=0),
                pod()])
    bare.settle()
    assert _events(bare, "p") == [("FailedScheduling", "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
                                                       "2 node(s) had untolerated taint {dedicated: gpu}.")]


def test_a_cordoned_node_is_unschedulable_and_tainted(bare: SimCluster, core: k8s.CoreV1Api) -> None:
    """NodeUnschedulable: `node(s) were unschedulable`; the lifecycle controller adds
    `node.kubernetes.io/unschedulable:NoSchedule`, which a pod may tolerate to land there anyway."""
    bare.apply(gpu_node("gpu-1"))
    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    bare.apply([pod(), pod("tolerant", tolerations=[{"key": "node.kubernetes.io/unschedulable",
                                                     "operator": "Exists", "effect": "NoSchedule"}])])
    bare.settle()
    assert [t.key for t in core.read_node("gpu-1").spec.taints] == ["node.kubernetes.io/unschedulable"]
    assert _events(bare, "p") == [("FailedScheduling", "0/1 nodes are available: 1 node(s) were unschedulable.")]
    assert _phase(bare, "tolerant") == ("Running", "gpu-1")


def test_no_execute_taint_evicts_running_pods_that_do_not_tolerate_it(bare: SimCluster, core: k8s.CoreV1Api) -> None:
    """The NoExecute taint manager deletes a running pod that does not tolerate a new NoExecute taint of its
    node (Event TaintManagerEviction `Marking for deletion Pod ml/p`); a tolerating pod keeps running; the
    replacement a controller creates cannot land there (NoExecute also filters scheduling)."""
    bare.apply([gpu_node("gpu-1"), pod(), pod("tolerant", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
                deployment(replicas=1)])
    bare.settle()
    web = next(p["metadata"]["name"] for p in bare.list("pods", "ml") if p["metadata"]["name"].startswith("web-"))
    core.patch_node("gpu-1", {"spec": {"taints": [{**DEDICATED, "effect": "NoExecute"}]}})
    bare.settle()
    names = {p["metadata"]["name"]: p["status"].get("phase") for p in bare.list("pods", "ml")}
    assert "p" not in names and web not in names and names["tolerant"] == "Running"
    assert ("TaintManagerEviction", "Marking for deletion Pod ml/p") in _events(bare, "p")
    (replacement,) = [n for n in names if n.startswith("web-")]
    assert names[replacement] == "Pending"
