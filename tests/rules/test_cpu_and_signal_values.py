"""The values of the CPU half and of the busy signal: validation names the key, and the render follows them."""

from __future__ import annotations

import pytest

from reactor.core.errors import ConfigError
from reactor.tools.rules import rule_groups
from reactor.tools.rules.values import build_values


def rules_of(doc: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for rule in rule_groups(build_values(doc))["groups"][0]["rules"]:
        found.setdefault(rule.get("record") or rule["alert"], []).append(rule)
    return found


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"signal": "tensor_active"}, "signal"),
        ({"signal": {"expr": ""}}, "signal"),
        ({"signal": {"expr": "x", "other": 1}}, "signal"),
        ({"namespaces": {"ml": {"signal": 3}}}, "namespaces.ml.signal"),
        ({"scrape": {"cadvisorLabels": "auto"}}, "scrape.cadvisorLabels"),
        ({"defaults": {"starvedByCpu": {"threshold": 1.5}}}, "defaults.starvedByCpu.threshold"),
        ({"defaults": {"cpuThrottling": {"threshold": 0.2}}}, "defaults.cpuThrottling.threshold"),
    ],
)
def test_bad_values_name_the_key(doc: dict, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_values(doc)
    assert e.value.key == key


def test_the_default_signal_keeps_the_gr_engine_active_series() -> None:
    rules = rules_of({})
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in rules["gpu_reactor:gpu_utilization:ratio"][0]["expr"]
    (container,) = rules["gpu_reactor:container_gpu_utilization:ratio"]
    assert container["expr"] == ("avg by (namespace, pod, container) (gpu_reactor:gpu_utilization:ratio) "
                                 "unless on (namespace, pod, container) gpu_reactor:container_gpu_shared:pods")


def test_a_namespace_signal_gets_its_own_series_and_one_rule() -> None:
    rules = rules_of({"namespaces": {"ml-serving": {"signal": "sm_active"}}})
    assert "DCGM_FI_PROF_SM_ACTIVE" in rules["gpu_reactor:gpu_sm_active:ratio"][0]["expr"]
    (container,) = rules["gpu_reactor:container_gpu_utilization:ratio"]
    assert 'gpu_reactor:gpu_utilization:ratio{namespace!~"ml-serving"}' in container["expr"]
    assert 'gpu_reactor:gpu_sm_active:ratio{namespace="ml-serving"}' in container["expr"]


def test_the_starved_alert_follows_a_namespace_s_underutilized_threshold() -> None:
    rules = rules_of({"namespaces": {"ml-research": {"underutilized": {"threshold": 0.1}}}})
    starved = {r["labels"].get("thresholds", "default"): r["expr"] for r in rules["GPUStarvedByCPU"]}
    assert set(starved) == {"default", "namespaces.ml-research"}
    assert '{namespace="ml-research"}[15m]) < 0.1' in starved["namespaces.ml-research"]
    assert '{namespace!~"ml-research"}[15m]) < 0.3' in starved["default"]


def test_exported_cadvisor_labels_are_copied_over_the_plain_ones() -> None:
    expr = rules_of({"scrape": {"cadvisorLabels": "exported"}})["gpu_reactor:container_cpu_throttling:ratio"][0]["expr"]
    assert 'exported_pod!=""' in expr and '"namespace", "$1", "exported_namespace"' in expr
