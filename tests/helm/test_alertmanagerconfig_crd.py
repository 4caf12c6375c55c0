"""The chart's AlertmanagerConfig against prometheus-operator's real CRD schema (v1alpha1, operator 0.93.1).

The schema is upstream's (tests/fixtures/crds/monitoring.coreos.com_alertmanagerconfigs.yaml); the check
rejects what the API server rejects (unknown fields, wrong types, bad durations, enums), shown below on
broken copies, so a passing render means something.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.helm.charts import by_key, render
from tests.helm.crd_schema import ALERTMANAGER_CONFIG_CRD, problems, served
from tests.helm.test_chart import ALL_ON

ENABLED: dict[str, Any] = {"alertmanagerConfig": {"enabled": True}}
CUSTOM: dict[str, Any] = {"alertmanagerConfig": {
    "enabled": True, "namespace": "monitoring", "labels": {"alertmanagerConfig": "gpu"}, "tokenSecret": "copied",
    "groupBy": ["namespace", "pod"], "groupWait": "1m30s", "groupInterval": "10m", "repeatInterval": "2h"}}


def _config(values: dict[str, Any]) -> dict[str, Any]:
    (obj,) = [o for o in render(values) if o["kind"] == "AlertmanagerConfig"]
    return obj


def test_the_fixture_is_the_served_v1alpha1_schema() -> None:
    assert set(served(ALERTMANAGER_CONFIG_CRD)) == {("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig")}
    assert "operator.prometheus.io/version: 0.93.1" in ALERTMANAGER_CONFIG_CRD.read_text(encoding="utf-8")


@pytest.mark.parametrize("values", [ENABLED, CUSTOM, ALL_ON], ids=["enabled", "custom", "all-options"])
def test_the_rendered_config_is_valid_for_the_crd(values: dict[str, Any]) -> None:
    obj = _config(values)
    assert problems(obj, ALERTMANAGER_CONFIG_CRD) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return change


def _rename(path: str, new: str) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[new] = node.pop(last)
    return change


@pytest.mark.parametrize(("change", "where"), [
    (_rename("spec.route.groupBy", "groupby"), "spec.route"),
    (_rename("spec.receivers.0.webhookConfigs", "webhookConfig"), "spec.receivers.0"),
    (_rename("spec.receivers.0.webhookConfigs.0.httpConfig.authorization.credentials", "credential"),
     "spec.receivers.0.webhookConfigs.0.httpConfig.authorization"),
    (_set("spec.receivers.0.webhookConfigs.0.maxAlerts", "0"), "spec.receivers.0.webhookConfigs.0.maxAlerts"),
    (_set("spec.receivers.0.webhookConfigs.0.maxAlerts", -1), "spec.receivers.0.webhookConfigs.0.maxAlerts"),
    (_set("spec.receivers.0.webhookConfigs.0.sendResolved", "yes"),
     "spec.receivers.0.webhookConfigs.0.sendResolved"),
    (_set("spec.route.groupWait", "1 minute"), "spec.route.groupWait"),
    (_set("spec.route.groupWait", "30s1m"), "spec.route.groupWait"),
    (_set("spec.route.matchers.0.matchType", "=="), "spec.route.matchers.0.matchType"),
    (_set("spec.route.matchers", [{"value": "gpu"}]), "spec.route.matchers.0"),
    (_set("spec.route.groupBy", "namespace"), "spec.route.groupBy"),
    (_set("spec.receivers", [{"webhookConfigs": []}]), "spec.receivers.0"),
], ids=["misspelled-route-field", "misspelled-receiver-field", "misspelled-secret-ref", "maxAlerts-string",
        "maxAlerts-negative", "sendResolved-string", "duration-words", "duration-order", "matchType-enum",
        "matcher-without-name", "groupBy-not-a-list", "receiver-without-name"])
def test_a_broken_config_is_rejected_where_it_is_broken(change: Callable[[dict[str, Any]], None], where: str) -> None:
    obj = copy.deepcopy(_config(CUSTOM))
    change(obj)
    found = problems(obj, ALERTMANAGER_CONFIG_CRD)
    assert any(p.startswith(f"{where}:") for p in found), found


def test_a_wrong_version_or_kind_is_rejected() -> None:
    obj = copy.deepcopy(_config(ENABLED))
    obj["apiVersion"] = "monitoring.coreos.com/v1beta1"
    (problem,) = problems(obj, ALERTMANAGER_CONFIG_CRD)
    assert problem.startswith("(top): AlertmanagerConfig monitoring.coreos.com/v1beta1 is not served")


def test_the_values_schema_refuses_a_duration_the_crd_refuses() -> None:
    """groupWait: 30s1m passed the chart's own schema once and only failed in the cluster."""
    import helm_python

    with pytest.raises(helm_python.HelmError, match="groupWait"):
        render({"alertmanagerConfig": {"enabled": True, "groupWait": "30s1m"}})
    assert by_key(render({"alertmanagerConfig": {"enabled": True, "groupWait": "1h30s"}}))
