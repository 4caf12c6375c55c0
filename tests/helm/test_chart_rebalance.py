"""The chart with `policy.rebalance.enabled`: the reactor may reach Alertmanager's API (GET /api/v2/alerts, which
donors are idle now), and only then; the rendered policy is one the reactor accepts."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest
import yaml

from reactor.config.settings import build_settings
from tests.deploy.test_deploy_build import VERSIONS, _validate
from tests.helm.charts import CHART, NAMESPACE, by_key, render

REBALANCE = {"policy": {"rebalance": {"enabled": True,
                                      "alertmanagerUrl": "http://alertmanager-operated.monitoring:9093"}}}
ALERTMANAGER_EGRESS = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                                                  "values": ["alertmanager"]}]}}],
    "ports": [{"protocol": "TCP", "port": 9093}],
}


def _egress(values: dict[str, Any]) -> list[dict[str, Any]]:
    return list(by_key(render(values))[("NetworkPolicy", NAMESPACE, "gpu-reactor")]["spec"]["egress"])


def test_without_rebalancing_the_egress_is_dns_and_the_api_server_only() -> None:
    assert len(_egress({})) == 2
    assert ALERTMANAGER_EGRESS not in _egress({"policy": {"rebalance": {"enabled": False}}})


def test_rebalancing_opens_alertmanagers_api_port_to_its_pods() -> None:
    egress = _egress(REBALANCE)
    assert len(egress) == 3 and egress[2] == ALERTMANAGER_EGRESS


def test_the_namespace_pod_names_and_ports_follow_the_values() -> None:
    values = {**REBALANCE, "networkPolicy": {"ingressNamespace": "observability", "alertmanagerPodNames": ["am"],
                                             "alertmanagerApiPorts": [9095, 9093]}}
    (to,) = _egress(values)[2]["to"]
    assert to["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "observability"}
    assert to["podSelector"]["matchExpressions"][0]["values"] == ["am"]
    assert _egress(values)[2]["ports"] == [{"protocol": "TCP", "port": 9095}, {"protocol": "TCP", "port": 9093}]


def test_a_port_out_of_range_is_refused_by_the_values_schema() -> None:
    with pytest.raises(Exception, match="alertmanagerApiPorts"):
        render({**REBALANCE, "networkPolicy": {"alertmanagerApiPorts": [70000]}})


@pytest.mark.parametrize("version", VERSIONS)
def test_the_objects_are_valid_for_kubernetes_and_the_policy_for_the_reactor(version: str) -> None:
    objs = render(REBALANCE)
    for obj in objs:
        if obj["kind"] not in {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}:
            _validate(obj, version)
    cm = by_key(objs)[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]
    settings = build_settings(yaml.safe_load(cm["data"]["policy.yaml"]), environ={})
    assert settings.policy.rebalance_enabled
    assert settings.alertmanager.url == "http://alertmanager-operated.monitoring:9093"


def test_lint_with_rebalancing_on_reports_no_error_or_warning() -> None:
    report = helm_python.lint(str(CHART), values=REBALANCE, strict=True, namespace=NAMESPACE)
    assert (report["errors"], [m for m in report["messages"] if m["severity"] >= 2]) == ([], []), report
