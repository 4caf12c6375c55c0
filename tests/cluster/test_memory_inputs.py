"""The memory action's inputs: memory read from resources, LimitRange and quotas in bytes; the resizePolicy
that decides in place or not; the policy keys; the recorded original (forged or out-of-range values refused)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reactor.cluster.compute import container_compute, resize_body, resize_status, restarts_on_resize, to_compute_bounds
from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError
from reactor.core.model import ComputeBounds, ComputeQuota, ComputeResources
from reactor.state.annotations import ORIGINAL, read_state

pytestmark = pytest.mark.unit

GI, MI = 1 << 30, 1 << 20


def test_memory_read_from_resources_limitrange_and_quota() -> None:
    resources = {"requests": {"memory": "1536Mi", "cpu": "1"}, "limits": {"memory": "2G", "cpu": "2"}}
    assert container_compute(resources, "memory") == ComputeResources(1536 * MI, 2_000_000_000)
    assert container_compute(resources) == ComputeResources(1000, 2000), "CPU still in millicores"
    assert container_compute({"limits": {"memory": "lots"}}, "memory") == ComputeResources(None, None)
    lr = {"spec": {"limits": [{"type": "Container", "max": {"memory": "64Gi"}, "min": {"memory": "1Gi"},
                               "maxLimitRequestRatio": {"memory": "2", "cpu": "10"}},
                              {"type": "Container", "max": {"memory": "32Gi"}, "maxLimitRequestRatio": {"memory": "4"}},
                              {"type": "Pod", "max": {"memory": "1Gi"}}]}}
    quotas = [{"metadata": {"name": "a"}, "spec": {"hard": {"requests.memory": "100Gi", "limits.cpu": "8"}},
               "status": {"hard": {"requests.memory": "100Gi"}, "used": {"requests.memory": "40Gi"}}},
              {"metadata": {"name": "b"}, "spec": {"hard": {"limits.memory": "200Gi", "memory": "bogus"}}}]
    # The Pod item bounds the pod's sum, not each container (policy/pod.py): kept apart.
    assert to_compute_bounds([lr], quotas, "memory") == ComputeBounds(lowest=GI, highest=32 * GI, max_ratio=2.0,
                                                                      pod_highest=GI, quotas=(
        ComputeQuota("a", "requests.memory", hard=100 * GI, used=40 * GI),
        ComputeQuota("b", "limits.memory", hard=200 * GI, used=0)))
    assert [q.resource for q in to_compute_bounds([lr], quotas).quotas] == ["limits.cpu"], "the CPU lines stay apart"
    assert to_compute_bounds([lr], quotas).max_ratio == 10.0


def test_resize_policy_restart_container_for_memory_only() -> None:
    pod = {"spec": {"containers": [
        {"name": "a", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                       {"resourceName": "memory", "restartPolicy": "RestartContainer"}]},
        {"name": "b", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]},
        {"name": "c"},
        {"name": "d", "resizePolicy": "garbage"}]}}
    assert restarts_on_resize(pod, "memory") == frozenset({"a"})
    assert restarts_on_resize(pod, "cpu") == frozenset({"b"})
    assert restarts_on_resize(None, "memory") == frozenset()


def test_resize_body_and_status_for_memory() -> None:
    body = resize_body("main", ComputeResources(10 * GI, 10 * GI), "memory")
    assert body == {"spec": {"containers": [{"name": "main", "resources": {"limits": {"memory": "10Gi"},
                                                                           "requests": {"memory": "10Gi"}}}]}}
    odd = resize_body("main", ComputeResources(None, 10**9 + 1), "memory")
    assert odd["spec"]["containers"][0]["resources"] == {"limits": {"memory": "1000000001"}}
    pod = {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "2", "memory": "10Gi"}}}]},
           "status": {"containerStatuses": [{"name": "main", "resources": {"limits": {"cpu": "2", "memory": "8Gi"}}}]}}
    assert resize_status(pod) == "Proposed", "memory not yet applied"
    pod["status"]["containerStatuses"][0]["resources"]["limits"]["memory"] = "10Gi"
    assert resize_status(pod) == "done"


def test_memory_policy_keys() -> None:
    settings = build_settings({"memory": {"step": 0.5, "max": "64Gi"}}, {})
    assert (settings.policy.memory_step, settings.policy.memory_max_bytes) == (0.5, 64 * GI)
    assert build_settings({"memory": {"max": "1Pi"}}, {}).policy.memory_max_bytes == 1 << 50
    assert build_settings({"memory": {"max": 68719476736}}, {}).policy.memory_max_bytes == 64 * GI
    default = build_settings({}, {}).policy
    assert (default.memory_step, default.memory_max_bytes) == (0.25, 256 * GI)
    assert default.alerts["GPUContainerNearMemoryLimit"] == ("resize-memory-up",)
    assert default.resizes_pods_in_place
    only_memory = build_settings({"alerts": {"GPUContainerNearMemoryLimit": ["resize-memory-up"]}}, {}).policy
    assert only_memory.resizes_pods_in_place, "memory in place needs the pods/resize grant too"


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"memory": {"step": 0}}, "memory.step"),
        ({"memory": {"step": "a lot"}}, "memory.step"),
        ({"memory": {"max": "64GB"}}, "memory.max"),
        ({"memory": {"max": "1Ki"}}, "memory.max"),
        ({"memory": {"max": "1025Ti"}}, "memory.max"),
        ({"memory": {"max": 2**50 + 1}}, "memory.max"),
        ({"memory": {"max": True}}, "memory.max"),
        ({"memory": {"stride": 1}}, "memory.stride"),
    ],
)
def test_bad_memory_policy_keys_name_the_key(doc: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_settings(doc, {})
    assert e.value.key == key


@pytest.mark.parametrize(
    ("original", "valid"),
    [
        ({"memory": {"main": {"request": 8 * GI, "limit": 8 * GI}}}, True),
        ({"memory": {"main": {"request": None, "limit": 8 * GI}}}, True),
        ({"memory": {"main": {"request": 8 * GI, "limit": 1 << 51}}}, False),
        ({"memory": {"main": {"request": -1, "limit": 8 * GI}}}, False),
        ({"memory": {"main": {"limit": 8 * GI}}}, False),
        ({"memory": {"main": {"request": "8Gi", "limit": 8 * GI}}}, False),
        ({"memory": ["main"]}, False),
    ],
)
def test_the_recorded_original_memory_is_checked(original: dict[str, Any], valid: bool) -> None:
    state = read_state({ORIGINAL: json.dumps(original)})
    if valid:
        assert state.original["memory"]["main"] == ComputeResources(**original["memory"]["main"])
    else:
        assert ORIGINAL in state.invalid and "memory" not in state.original
