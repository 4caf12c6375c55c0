"""workloads.to_bounds, namespace_bounds and pod_shape: raw ResourceQuota / LimitRange / PriorityClass / pod
template objects into the values the policy reads (quota lines with their scope terms, the default class, the
pods' QoS)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reactor.cluster.workloads import namespace_bounds, pod_shape, pod_usage, to_bounds
from reactor.core.model import Bounds, ComputeQuota, ComputeResources, PodShape, Quota, ScopeTerm

pytestmark = pytest.mark.unit

KEY = "requests.nvidia.com/gpu"


def _quota(name: str, hard: str, used: str | None = None, **spec: Any) -> dict[str, Any]:
    status = {"hard": {KEY: hard}, "used": {KEY: used}} if used is not None else {}
    return {"metadata": {"name": name}, "spec": {"hard": {KEY: hard}, **spec}, "status": status}


def test_every_gpu_quota_is_kept_with_its_scope() -> None:
    quotas = [
        _quota("plain", "16", "4"),
        _quota("high", "2", "0", scopeSelector={"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high-priority-gpu"]}]}),
        _quota("batch", "8", scopes=["Terminating", "NotBestEffort"]),
        {"metadata": {"name": "cpu-only"}, "spec": {"hard": {"requests.cpu": "4"}}},
    ]
    bounds = to_bounds([], quotas, "nvidia.com/gpu")
    assert bounds.quotas == (
        Quota("batch", 8, 0, (ScopeTerm("Terminating"), ScopeTerm("NotBestEffort"))),
        Quota("high", 2, 0, (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)),
        Quota("plain", 16, 4),
    )


def test_the_default_class_is_the_lowest_global_default() -> None:
    classes = [{"metadata": {"name": "a"}, "value": 10, "globalDefault": True},
               {"metadata": {"name": "b"}, "value": 5, "globalDefault": True},
               {"metadata": {"name": "c"}, "value": 1}]
    assert to_bounds([], [], "nvidia.com/gpu", priority_classes=classes).default_priority_class == "b"
    assert to_bounds([], [], "nvidia.com/gpu", priority_classes=classes[2:]).default_priority_class is None


@pytest.mark.parametrize(("item", "fills"), [
    ({"type": "Container", "defaultRequest": {"cpu": "100m"}}, True),
    ({"type": "Container", "max": {"memory": "1Gi"}}, True),
    ({"type": "Container", "min": {"cpu": "10m"}}, True),
    ({"type": "Container", "max": {"nvidia.com/gpu": "4"}}, False),
    ({"type": "Pod", "max": {"cpu": "4"}}, False),
], ids=["default-request", "max-defaults-the-limit", "min-defaults-the-request", "gpu-only", "pod-item"])
def test_a_limit_range_that_fills_cpu_or_memory_makes_no_pod_best_effort(item: dict[str, Any], fills: bool) -> None:
    assert to_bounds([{"spec": {"limits": [item]}}], [], "nvidia.com/gpu").defaults_compute is fills


@pytest.mark.parametrize(("spec", "shape"), [
    ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, PodShape(best_effort=True)),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}, PodShape()),
    ({"initContainers": [{"resources": {"limits": {"memory": "1Gi"}}}], "containers": [{}]}, PodShape()),
    ({"containers": [{"resources": {"requests": {"cpu": "0"}}}]}, PodShape(best_effort=True)),
    ({"containers": [{}], "activeDeadlineSeconds": 0}, PodShape(best_effort=True, terminating=True)),
    ({"containers": [{}], "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"namespaceSelector": {}}]}}}, PodShape(best_effort=True, cross_namespace_affinity=True)),
], ids=["gpu-only-is-best-effort", "cpu-request", "init-container-memory", "zero-cpu-does-not-count",
        "deadline-zero-is-terminating", "namespace-selector-affinity"])
def test_pod_shape_follows_the_quota_evaluator(spec: dict[str, Any], shape: PodShape) -> None:
    assert replace(pod_shape(spec), cpu=None, memory=None) == shape


def _c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **kw}


@pytest.mark.parametrize(("spec", "cpu"), [
    ({"containers": [_c({"cpu": "1"}, {"cpu": "2"}), _c({"cpu": "500m"}, {"cpu": "500m"})]},
     ComputeResources(1500, 2500)),
    ({"containers": [_c(limits={"cpu": "2"})]}, ComputeResources(2000, 2000)),  # the request defaults to the limit
    ({"containers": [_c({"cpu": "1"})]}, ComputeResources(1000, None)),
    ({"containers": [_c({"cpu": "1"}, {"cpu": "1"})], "initContainers": [_c({"cpu": "4"}, {"cpu": "4"})]},
     ComputeResources(4000, 4000)),
    ({"containers": [_c({"cpu": "1"}, {"cpu": "1"})],
      "initContainers": [_c({"cpu": "1"}, {"cpu": "1"}, restartPolicy="Always"), _c({"cpu": "3"}, {"cpu": "3"})]},
     ComputeResources(4000, 4000)),
    ({"containers": [_c({"memory": "1Gi"})]}, None),
], ids=["containers-summed", "limit-alone-is-the-request", "no-limit", "init-container-max",
        "sidecar-summed-and-under-the-next-init", "no-cpu"])
def test_pod_usage_is_what_quota_charges_a_new_pod(spec: dict[str, Any], cpu: ComputeResources | None) -> None:
    """resourcehelper.PodRequests / PodLimits, as podComputeUsageHelper charges them."""
    assert pod_usage(spec, "cpu") == cpu
    assert pod_shape(spec).cpu == cpu


class _Reader:
    def __init__(self, quotas: list[dict[str, Any]]) -> None:
        self.quotas, self.class_reads = quotas, 0

    def list_objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return self.quotas if kind == "ResourceQuota" else []

    def priority_class_objects(self) -> list[dict[str, Any]]:
        self.class_reads += 1
        return [{"metadata": {"name": "medium"}, "value": 1, "globalDefault": True}]


def test_priority_classes_are_read_only_for_a_class_scoped_quota() -> None:
    plain = _Reader([_quota("plain", "4")])
    assert namespace_bounds(plain, "ml", "nvidia.com/gpu").default_priority_class is None and plain.class_reads == 0
    scoped = _Reader([_quota("s", "4", scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Exists"}]})])
    assert namespace_bounds(scoped, "ml", "nvidia.com/gpu").default_priority_class == "medium"
    assert scoped.class_reads == 1


def test_the_pod_count_lines_and_which_compute_lines_exist_come_with_the_gpu_bounds() -> None:
    """A GPU change's pods are charged `pods`/`count/pods` and CPU/memory too (pods.go PodUsageFunc): the pod lines
    are read with the GPU's, and only which compute lines exist (their values are read where a change needs them)."""
    high = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high-priority-gpu"]}]}
    quotas = [
        {"metadata": {"name": "objects"}, "spec": {"hard": {"pods": "10", "count/pods": "20"}},
         "status": {"hard": {"pods": "10", "count/pods": "20"}, "used": {"pods": "4", "count/pods": "6"}}},
        {"metadata": {"name": "high"}, "spec": {"hard": {"limits.memory": "64Gi", "pods": "2"}, "scopeSelector": high}},
        _quota("gpus", "8", "2"),
    ]
    bounds = to_bounds([], quotas, "nvidia.com/gpu")
    high_scope = (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)
    assert bounds.pod_quotas == (ComputeQuota("high", "pods", 2, 0, high_scope),
                                 ComputeQuota("objects", "count/pods", 20, 6), ComputeQuota("objects", "pods", 10, 4))
    assert bounds.compute_lines == frozenset({"memory"})
    assert to_bounds([], [_quota("gpus", "8")], "nvidia.com/gpu").compute_lines == frozenset()


def test_reserving_adds_the_pods_earlier_actions_created() -> None:
    bounds = Bounds(quotas=(Quota("gpus", 8, 2),), pod_quotas=(ComputeQuota("objects", "pods", 10, 4),))
    reserved = bounds.reserving({"gpus": 1}, {("objects", "pods"): 3, ("objects", "requests.cpu"): 500})
    assert reserved.quotas == (Quota("gpus", 8, 3),)
    assert reserved.pod_quotas == (ComputeQuota("objects", "pods", 10, 7),)
    assert bounds.reserving({}, {}) is bounds
