"""Every manifest under deploy/ goes into the embedded cluster as `kubectl apply -k` would send it, and the
examples' pods pass its admission (LimitRange, PriorityClass, ResourceQuota) under deploy/base."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from reactor_sim import ApiError, SimCluster
from tests.deploy.deploy_helpers import DEPLOY, ENTRY_POINTS, load_all, render

NAMESPACE = "ml-workloads"
# What each entry point needs applied first (kubectl apply -k order in deploy/reactor/README.md).
NEEDS: dict[str, tuple[str, ...]] = {"base": (), "reactor": ("base",), "reactor/monitoring": ("base", "reactor"),
                                     "examples": ("base",), "examples/amd-gpu": ()}


def _plural(sim: SimCluster, obj: dict[str, Any]) -> str:
    group = obj["apiVersion"].rpartition("/")[0]
    return next(r.plural for r in sim.registry.resources if r.kind == obj["kind"] and r.group == group)


def _h100_node(name: str) -> dict[str, Any]:
    """A Ready 8 x H100 node as the examples expect one: GPU Operator and NFD labels, the usual
    `nvidia.com/gpu:NoSchedule` taint that keeps non-GPU pods off (every example tolerates it)."""
    room = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "feature.node.kubernetes.io/rdma.capable": "true"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": room, "allocatable": dict(room),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    """The embedded cluster with two Ready H100 nodes: 16 GPUs, as many as deploy/base's quota allows."""
    cluster = SimCluster().start()
    cluster.apply([_h100_node("gpu-node-1"), _h100_node("gpu-node-2")])
    try:
        yield cluster
    finally:
        cluster.stop()


def test_the_entry_points_are_the_ones_deploy_helpers_knows() -> None:
    assert set(NEEDS) == set(ENTRY_POINTS)


def _contains(stored: Any, sent: Any) -> bool:
    """Everything that was sent is there unchanged; the server may only add (defaults, status, metadata)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and _contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(_contains, stored, sent))
    return bool(stored == sent)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_rendered_object_is_stored_as_sent(sim: SimCluster, entry: str) -> None:
    """Each entry point (with what it depends on) loads without an error, and every object reads back with all
    it was sent, defaulting only adding to it (CRD kinds such as ServiceMonitor are stored as sent)."""
    for dependency in NEEDS[entry]:
        sim.apply(render(dependency))
    objects = render(entry)
    sim.apply(copy.deepcopy(objects))
    for obj in objects:
        meta = obj["metadata"]
        stored = sim.get(_plural(sim, obj), meta.get("namespace"), meta["name"])
        assert _contains(stored, obj), f"{obj['kind']}/{meta['name']}"


def test_the_prometheus_rule_is_stored_in_the_monitoring_namespace(sim: SimCluster) -> None:
    """deploy/prometheus (a PrometheusRule, no CRD here) goes into kube-prometheus-stack's namespace."""
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}})
    (rule,) = load_all(DEPLOY / "prometheus" / "gpu-reactor-prometheusrule.yaml")
    sim.apply(copy.deepcopy(rule))
    assert sim.get("prometheusrules", "monitoring", "gpu-reactor")["spec"] == rule["spec"]


def _examples(sim: SimCluster) -> None:
    sim.apply(render("base"))
    sim.apply(render("examples"))
    sim.settle()


def test_the_example_deployments_run_under_the_base_quota_and_limit_range(sim: SimCluster) -> None:
    """deploy/examples on deploy/base: every replica is admitted and Running, with its PriorityClass resolved
    and nothing denied (no FailedCreate)."""
    _examples(sim)
    pods = sim.list("pods", NAMESPACE)
    by_app = {}
    for pod in pods:
        by_app.setdefault(pod["metadata"]["labels"]["app.kubernetes.io/name"], []).append(pod)
    assert {app: len(p) for app, p in by_app.items()} == {"embedding-service": 1, "llm-inference": 2}
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert {p["spec"]["priority"] for p in by_app["llm-inference"]} == {100000}
    assert {p["spec"]["priority"] for p in by_app["embedding-service"]} == {50000}
    assert not [e for e in sim.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]
    quota = sim.get("resourcequotas", NAMESPACE, "gpu-quota")["status"]
    assert quota == {"hard": {"requests.nvidia.com/gpu": "16"}, "used": {"requests.nvidia.com/gpu": "3"}}


def test_the_example_cronjob_run_fits_beside_them(sim: SimCluster) -> None:
    """A run of the example CronJob (8 GPUs, burst-gpu) is admitted next to the Deployments: 11 of 16 GPUs."""
    _examples(sim)
    job = sim.trigger_cronjob(NAMESPACE, "nightly-finetune")
    assert job is not None
    sim.settle()
    (pod,) = [p for p in sim.list("pods", NAMESPACE) if p["metadata"]["ownerReferences"][0]["kind"] == "Job"]
    assert pod["status"]["phase"] == "Running" and pod["spec"]["priority"] == 10000
    assert pod["spec"]["preemptionPolicy"] == "Never"
    assert sim.get("resourcequotas", NAMESPACE, "gpu-quota")["status"]["used"] == {"requests.nvidia.com/gpu": "11"}
    assert not [e for e in sim.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]


def test_a_rollout_of_every_example_fits_with_its_surge(sim: SimCluster) -> None:
    """With the CronJob's run active, a template change to each Deployment rolls out completely: the surge
    pods (one each) fit the quota too."""
    _examples(sim)
    assert sim.trigger_cronjob(NAMESPACE, "nightly-finetune") is not None
    sim.settle()
    for name in ("embedding-service", "llm-inference"):
        deploy = sim.get("deployments", NAMESPACE, name)
        deploy["spec"]["template"]["metadata"].setdefault("annotations", {})["example/restartedAt"] = "now"
        sim.apply(deploy)
    sim.controllers.run_once()
    assert sim.get("resourcequotas", NAMESPACE, "gpu-quota")["status"]["used"] == {"requests.nvidia.com/gpu": "13"}
    sim.settle()
    for name in ("embedding-service", "llm-inference"):
        status = sim.get("deployments", NAMESPACE, name)["status"]
        assert status["updatedReplicas"] == status["availableReplicas"] == status["replicas"]
    assert not [e for e in sim.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]


def test_a_container_without_gpus_gets_zero_from_the_base_limit_range(sim: SimCluster) -> None:
    """deploy/base's LimitRange defaults nvidia.com/gpu to 0 (not to its max of 8): a CPU-only sidecar asks
    for no GPU, and a container above the max is refused."""
    sim.apply(render("base"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu-only", "namespace": NAMESPACE},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    created = sim.apply(copy.deepcopy(pod))
    assert created["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "0"},
                                                             "requests": {"nvidia.com/gpu": "0"}}
    pod["metadata"]["name"] = "too-big"
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "9"}}
    with pytest.raises(ApiError) as info:
        sim.apply(pod)
    assert info.value.code == 403
    assert info.value.message == ('pods "too-big" is forbidden: maximum nvidia.com/gpu usage per Container is 8, '
                                  "but limit is 9")


def test_the_amd_base_constrains_amd_gpus(sim: SimCluster) -> None:
    """deploy/examples/amd-gpu: the same quota and LimitRange on amd.com/gpu."""
    sim.apply(render("examples/amd-gpu"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rocm", "namespace": NAMESPACE},
           "spec": {"containers": [{"name": "main", "image": "rocm/pytorch",
                                    "resources": {"limits": {"amd.com/gpu": "8"}}}]}}
    sim.apply(copy.deepcopy(pod))
    for name in ("rocm-2", "rocm-3"):
        pod["metadata"]["name"] = name
        if name == "rocm-3":
            with pytest.raises(ApiError) as info:
                sim.apply(copy.deepcopy(pod))
            assert info.value.message == ('pods "rocm-3" is forbidden: exceeded quota: gpu-quota, requested: '
                                          "requests.amd.com/gpu=8, used: requests.amd.com/gpu=16, limited: "
                                          "requests.amd.com/gpu=16")
        else:
            sim.apply(copy.deepcopy(pod))
