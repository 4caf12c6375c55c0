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


def test_without_rebalancing_the_egress_is_dns_the_api_server_and_prometheus_only() -> None:
    assert len(_egress({})) == 3  # the third: Prometheus's API, for the confirm step (tests/helm/test_chart_confirm.py)
    assert ALERTMANAGER_EGRESS not in _egress({"policy": {"rebalance": {"enabled": False}}})


def test_rebalancing_opens_alertmanagers_api_port_to_its_pods() -> None:
    egress = _egress(REBALANCE)
    assert len(egress) == 4 and egress[3] == ALERTMANAGER_EGRESS


def test_the_namespace_pod_names_and_ports_follow_the_values() -> None:
    values = {**REBALANCE, "networkPolicy": {"ingressNamespace": "observability", "alertmanagerPodNames": ["am"],
                                             "alertmanagerApiPorts": [9095, 9093]}}
    (to,) = _egress(values)[3]["to"]
    assert to["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "observability"}
    assert to["podSelector"]["matchExpressions"][0]["values"] == ["am"]
    assert _egress(values)[3]["ports"] == [{"protocol": "TCP", "port": 9095}, {"protocol": "TCP", "port": 9093}]


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


def test_the_alertmanager_token_and_ca_are_mounted_and_named_in_the_policy() -> None:
    """`rebalanceSource` mounts the Secret and the ConfigMap read-only (directory mounts: a rotation reaches the pod)
    and the rendered policy points the client at them; without them nothing is mounted."""
    values = {**REBALANCE, "rebalanceSource": {"tokenSecret": "am-proxy-token", "caConfigMap": "am-ca"}}
    rendered = by_key(render(values))
    pod = rendered[("Deployment", NAMESPACE, "gpu-reactor")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["alertmanager-token"]["secret"]["secretName"] == "am-proxy-token"
    assert volumes["alertmanager-token"]["secret"]["items"] == [{"key": "token", "path": "token"}]
    assert volumes["alertmanager-ca"]["configMap"]["name"] == "am-ca"
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["alertmanager-token"]["readOnly"] and "subPath" not in mounts["alertmanager-token"]
    policy = yaml.safe_load(rendered[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]["data"]["policy.yaml"])
    settings = build_settings(policy)
    assert settings.alertmanager.token_file == "/etc/gpu-reactor/alertmanager-token/token"
    assert settings.alertmanager.ca_file == "/etc/gpu-reactor/alertmanager-ca/ca.crt"
    bare = by_key(render(REBALANCE))[("Deployment", NAMESPACE, "gpu-reactor")]["spec"]["template"]["spec"]
    assert not {"alertmanager-token", "alertmanager-ca"} & {v["name"] for v in bare["volumes"]}


def test_the_policy_may_not_name_the_mounted_files_itself() -> None:
    """The chart owns those two keys, as it owns the webhook token's path: the schema refuses them."""
    with pytest.raises(Exception, match="alertmanagerTokenFile|not"):
        render({"policy": {"rebalance": {"enabled": True, "alertmanagerUrl": "http://am:9093",
                                         "alertmanagerTokenFile": "/x"}}})
