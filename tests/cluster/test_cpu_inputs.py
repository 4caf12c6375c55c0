"""The CPU half's inputs: the `cpu_throttling` annotation, the `cpu.*` policy keys, the CPU read from objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reactor.cluster.compute import container_compute, resize_status, to_compute_bounds
from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError, InvalidPayload
from reactor.core.model import ComputeBounds, ComputeQuota, ComputeResources, ScopeTerm
from reactor.intake.alerts import parse_notification
from reactor.policy import fold
from tests.support import sample

pytestmark = pytest.mark.unit


def with_throttling(value: str | None) -> dict[str, Any]:
    body = copy.deepcopy(sample("exported-labels-firing"))
    if value is not None:
        body["alerts"][0]["annotations"]["cpu_throttling"] = value
    return body


@pytest.mark.parametrize(
    ("raw", "ratio", "unknown"),
    [
        pytest.param("0.420", 0.42, False, id="a-ratio"),
        pytest.param("unknown", None, True, id="unknown-no-cadvisor-series"),
        pytest.param("NaN", None, True, id="nan-reads-unknown"),
        pytest.param(None, None, False, id="absent-claims-nothing"),
        pytest.param("1.02", 1.0, False, id="rate-noise-clamped"),
    ],
)
def test_cpu_throttling_annotation(raw: str | None, ratio: float | None, unknown: bool) -> None:
    alert = parse_notification(with_throttling(raw)).alerts[0]
    assert (alert.cpu_throttling, alert.cpu_unknown) == (ratio, unknown)


@pytest.mark.parametrize("raw", ["lots", "-0.1", "inf"])
def test_a_bad_cpu_throttling_is_a_400_naming_the_field(raw: str) -> None:
    with pytest.raises(InvalidPayload, match=r"annotations\.cpu_throttling"):
        parse_notification(with_throttling(raw))


def test_fold_keeps_the_highest_throttling_and_any_unknown() -> None:
    body = with_throttling("0.1")
    second = copy.deepcopy(body["alerts"][0])
    second["annotations"]["cpu_throttling"] = "0.7"
    second["fingerprint"] = "ab" + second["fingerprint"][2:]
    third = copy.deepcopy(second)
    third["annotations"]["cpu_throttling"] = "unknown"
    third["fingerprint"] = "cd" + third["fingerprint"][2:]
    body["alerts"] += [second, third]
    signal = fold(parse_notification(body).alerts)
    assert signal.cpu_throttling == 0.7 and signal.cpu_unknown


def test_cpu_policy_keys() -> None:
    policy = build_settings({"cpu": {"throttledAbove": 0.5, "step": "500m", "max": 8, "applyTo": "both",
                                     "unknownHolds": False}}).policy
    assert (policy.cpu_throttled_above, policy.cpu_step_m, policy.cpu_max_m, policy.cpu_apply_to,
            policy.cpu_unknown_holds) == (0.5, 500, 8000, "both", False)


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"cpu": {"applyTo": "nodes"}}, "cpu.applyTo"),
        ({"cpu": {"step": "1.5m"}}, "cpu.step"),
        ({"cpu": {"max": "2Gi"}}, "cpu.max"),
        ({"cpu": {"throttledAbove": 0}}, "cpu.throttledAbove"),
        ({"cpu": {"other": 1}}, "cpu.other"),
    ],
)
def test_bad_cpu_policy_keys_name_the_key(doc: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_settings(doc)
    assert e.value.key == key


def test_cpu_read_from_resources_and_quota() -> None:
    assert container_compute({"requests": {"cpu": "500m"}, "limits": {"cpu": "1.5"}}) == ComputeResources(500, 1500)
    assert container_compute({"limits": {"nvidia.com/gpu": "1"}}) is None
    assert container_compute({"limits": {"cpu": "bogus"}}) == ComputeResources(None, None)
    lr = {"spec": {"limits": [{"type": "Container", "max": {"cpu": "4"}, "min": {"cpu": "100m"}},
                              {"type": "Pod", "max": {"cpu": "1"}}]}}
    scoped = {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                       "values": ["high-priority-gpu"]}]}}
    quotas = [{"metadata": {"name": "a"}, "spec": {"hard": {"requests.cpu": "10"}},
               "status": {"hard": {"requests.cpu": "10"}, "used": {"requests.cpu": "7500m"}}},
              {"metadata": {"name": "b"}, "spec": {"hard": {"limits.cpu": "20", "cpu": "bogus"}, **scoped},
               "status": {"used": {"limits.cpu": "1"}}}]
    high = (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)
    assert to_compute_bounds([lr], quotas) == ComputeBounds(lowest=100, highest=4000, pod_highest=1000, quotas=(
        ComputeQuota("a", "requests.cpu", hard=10_000, used=7500),
        ComputeQuota("b", "limits.cpu", hard=20_000, used=1000, scopes=high)))


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], "done"),
        ([{"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "Node didn't have enough"}],
         "Deferred: Node didn't have enough"),
        ([{"type": "PodResizePending", "status": "True", "reason": "Infeasible", "message": "too big"}],
         "Infeasible: too big"),
        ([{"type": "PodResizeInProgress", "status": "True"}], "InProgress"),
        ([{"type": "PodResizeInProgress", "status": "True", "reason": "Error", "message": "cgroup write failed"}],
         "InProgress: Error: cgroup write failed"),
        ([{"type": "PodResizeInProgress", "status": "True"},
          {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "no room"}],
         "Deferred: no room"),
        ([{"type": "PodResizePending", "status": "False", "reason": "Deferred"}], "done"),
    ],
)
def test_resize_status(conditions: list[dict[str, str]], expected: str) -> None:
    assert resize_status({"status": {"conditions": conditions}}) == expected


def test_a_resize_the_kubelet_has_not_looked_at_yet_is_proposed() -> None:
    spec = {"containers": [{"name": "main", "resources": {"limits": {"cpu": "3"}, "requests": {"cpu": "3"}}}]}
    running = {"name": "main", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}}
    assert resize_status({"spec": spec, "status": {"containerStatuses": [running]}}) == "Proposed"
    running["resources"] = spec["containers"][0]["resources"]
    assert resize_status({"spec": spec, "status": {"containerStatuses": [running]}}) == "done"


def test_the_limit_range_defaults_are_what_limitranger_fills_in() -> None:
    """Each LimitRange merges its defaults in turn (the first to set one wins); within one, the last Container item
    naming the resource (defaultContainerResourceRequirements). Pod items fill nothing."""
    first = {"spec": {"limits": [{"type": "Pod", "max": {"cpu": "64"}},
                                 {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}},
                                 {"type": "Container", "default": {"cpu": "2", "memory": "1Gi"}}]}}
    second = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "4"}, "defaultRequest": {"cpu": "3",
                                                                                                   "memory": "1Gi"}}]}}
    cpu = to_compute_bounds([first, second], [])
    assert (cpu.default_request, cpu.default_limit) == (500, 2000)
    memory = to_compute_bounds([first, second], [], "memory")
    assert (memory.default_request, memory.default_limit) == (1 << 30, 1 << 30)
    assert to_compute_bounds([], []).default_request is None
