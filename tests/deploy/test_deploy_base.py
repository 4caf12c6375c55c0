"""GPU-namespace base (PriorityClasses, quota, LimitRange), the AMD variant, and the example workloads."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.deploy.deploy_helpers import containers, objects, one, pod_spec, render

GPU = "nvidia.com/gpu"
OTHER_SCHEDULERS = {50, 75, 100, 125}  # KAI's class values
SYSTEM_MIN = 1_000_000_000  # user classes must stay at or below this


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return objects("base")


@pytest.fixture(scope="module")
def classes(base: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in base if o["kind"] == "PriorityClass"}


@pytest.fixture(scope="module")
def examples() -> list[dict[str, Any]]:
    return objects("examples")


def _gpus(c: dict[str, Any], key: str = "limits") -> int:
    return int(c.get("resources", {}).get(key, {}).get(GPU, 0))


def test_priority_classes_are_ordered_high_medium_burst(classes: dict[str, dict[str, Any]]) -> None:
    assert set(classes) == {"high-priority-gpu", "medium-priority-gpu", "burst-gpu"}
    v = {n: c["value"] for n, c in classes.items()}
    assert v["high-priority-gpu"] > v["medium-priority-gpu"] > v["burst-gpu"] > 0
    for value in v.values():
        assert value not in OTHER_SCHEDULERS and value < SYSTEM_MIN


def test_burst_preempts_nobody_and_no_class_is_the_default(classes: dict[str, dict[str, Any]]) -> None:
    assert classes["burst-gpu"]["preemptionPolicy"] == "Never"
    assert classes["high-priority-gpu"].get("preemptionPolicy", "PreemptLowerPriority") == "PreemptLowerPriority"
    assert not any(c.get("globalDefault") for c in classes.values())


def test_quota_uses_the_requests_form_only(base: list[dict[str, Any]]) -> None:
    hard = one(base, "ResourceQuota", "gpu-quota")["spec"]["hard"]
    assert set(hard) == {f"requests.{GPU}"}
    assert int(hard[f"requests.{GPU}"]) > 0


def test_limit_range_sets_every_gpu_bound_explicitly(base: list[dict[str, Any]]) -> None:
    (limit,) = one(base, "LimitRange", "gpu-limits")["spec"]["limits"]
    assert limit["type"] == "Container"
    bounds = {k: int(limit[k][GPU]) for k in ("default", "defaultRequest", "min", "max")}
    # Without an explicit default the API server would default every container to `max`.
    assert bounds["default"] == bounds["defaultRequest"] == 0, "a non-zero default hands GPUs to sidecars"
    assert bounds["min"] <= bounds["default"] <= bounds["max"]
    assert "maxLimitRequestRatio" not in limit


def test_amd_variant_replaces_every_nvidia_resource() -> None:
    objs = render("examples/amd-gpu")
    assert "nvidia.com" not in repr(objs)
    assert one(objs, "ResourceQuota", "gpu-quota")["spec"]["hard"] == {"requests.amd.com/gpu": "16"}
    (limit,) = one(objs, "LimitRange", "gpu-limits")["spec"]["limits"]
    assert all(set(limit[k]) == {"amd.com/gpu"} for k in ("default", "defaultRequest", "min", "max"))


def test_base_renders_into_its_namespace() -> None:
    objs = render("base")
    assert one(objs, "Namespace", "ml-workloads")
    for obj in objs:
        if obj["kind"] in {"ResourceQuota", "LimitRange"}:
            assert obj["metadata"]["namespace"] == "ml-workloads"


# --- examples -------------------------------------------------------------------------------


def _workloads(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in examples if o["kind"] in {"Deployment", "StatefulSet", "CronJob"}]


def test_examples_cover_high_medium_and_a_cronjob(examples: list[dict[str, Any]]) -> None:
    kinds = {(o["kind"], pod_spec(o).get("priorityClassName")) for o in _workloads(examples)}
    assert {("Deployment", "high-priority-gpu"), ("Deployment", "medium-priority-gpu")} <= kinds
    assert any(k == "CronJob" for k, _ in kinds)


def test_examples_use_existing_priority_classes(examples: list[dict[str, Any]], classes: dict[str, Any]) -> None:
    for w in _workloads(examples):
        assert pod_spec(w)["priorityClassName"] in classes


def test_gpu_requests_equal_limits_within_the_limit_range(examples: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    (limit,) = one(base, "LimitRange", "gpu-limits")["spec"]["limits"]
    for w in _workloads(examples):
        for c in containers(w):
            assert _gpus(c, "requests") == _gpus(c, "limits"), f"{w['metadata']['name']}/{c['name']}"
            assert int(limit["min"][GPU]) <= _gpus(c) <= int(limit["max"][GPU])


def test_examples_fit_the_quota_with_rolling_update_surge(examples: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    total = 0
    for w in _workloads(examples):
        per_pod = sum(_gpus(c) for c in containers(w))
        pods = 1
        if w["kind"] == "Deployment":
            replicas = w["spec"].get("replicas", 1)
            surge = w["spec"].get("strategy", {}).get("rollingUpdate", {}).get("maxSurge", "25%")
            extra = math.ceil(replicas * int(surge[:-1]) / 100) if isinstance(surge, str) else surge
            pods = replicas + extra
        total += per_pod * pods
    assert total <= int(one(base, "ResourceQuota", "gpu-quota")["spec"]["hard"][f"requests.{GPU}"])


def test_deployments_are_ready_only_when_serving(examples: list[dict[str, Any]]) -> None:
    for w in (o for o in examples if o["kind"] == "Deployment"):
        for c in containers(w):
            assert "readinessProbe" in c
            assert {"cpu", "memory"} <= set(c["resources"]["requests"])
            assert "memory" in c["resources"]["limits"]


def test_gpu_pods_tolerate_the_gpu_taint(examples: list[dict[str, Any]]) -> None:
    for w in _workloads(examples):
        tolerations = pod_spec(w)["tolerations"]
        assert any(t["key"] == GPU and t["operator"] == "Exists" for t in tolerations), w["metadata"]["name"]


def test_training_cronjob_selects_gpu_model_and_rdma(examples: list[dict[str, Any]]) -> None:
    (cj,) = [o for o in examples if o["kind"] == "CronJob"]
    assert cj["apiVersion"] == "batch/v1"
    pod = pod_spec(cj)
    assert pod["nodeSelector"]["nvidia.com/gpu.product"].startswith("NVIDIA-")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    exprs = [(e["key"], e["operator"], e["values"]) for t in terms for e in t["matchExpressions"]]
    assert ("feature.node.kubernetes.io/rdma.capable", "In", ["true"]) in exprs
    assert pod["restartPolicy"] in {"Never", "OnFailure"}
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"


def test_reactor_bounds_on_examples_are_consistent(examples: list[dict[str, Any]]) -> None:
    for w in _workloads(examples):
        ann = w["metadata"].get("annotations", {})
        assert ann.get("gpu-reactor.io/mode") in {"off", "recommend", "enforce"}
        lo, hi = int(ann.get("gpu-reactor.io/min-gpus", 1)), int(ann.get("gpu-reactor.io/max-gpus", 8))
        current = max(_gpus(c) for c in containers(w))
        assert lo <= current <= hi, w["metadata"]["name"]
