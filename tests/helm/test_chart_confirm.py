"""The chart and the confirm step: the policy names kube-prometheus-stack's Prometheus, the NetworkPolicy opens egress
to its API (and only while confirm is on), a token and a CA are mounted and wired into the policy, and the optional
NetworkPolicy that keeps everyone but Prometheus and the reactor off Alertmanager's API."""

from __future__ import annotations

from typing import Any

import yaml

from reactor.config.settings import build_settings
from tests.helm.charts import NAMESPACE, by_key, render

PROMETHEUS_EGRESS = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                                                  "values": ["prometheus"]}]}}],
    "ports": [{"protocol": "TCP", "port": 9090}],
}


def _objs(values: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return by_key(render(values))


def _policy(objs: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    return dict(yaml.safe_load(objs[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]["data"]["policy.yaml"]))


def test_the_default_confirms_against_kube_prometheus_stacks_prometheus() -> None:
    objs = _objs({})
    settings = build_settings(_policy(objs), environ={})
    assert settings.confirm.enabled
    assert settings.confirm.url == "http://kube-prometheus-stack-prometheus.monitoring:9090"
    assert PROMETHEUS_EGRESS in objs[("NetworkPolicy", NAMESPACE, "gpu-reactor")]["spec"]["egress"]
    assert not [k for k in objs if k[0] == "NetworkPolicy" and k[2].endswith("alertmanager-ingress")]


def test_confirm_off_closes_the_egress() -> None:
    objs = _objs({"policy": {"confirm": {"enabled": False}}})
    assert PROMETHEUS_EGRESS not in objs[("NetworkPolicy", NAMESPACE, "gpu-reactor")]["spec"]["egress"]
    assert not build_settings(_policy(objs), environ={}).confirm.enabled


def test_a_token_and_a_ca_are_mounted_and_named_in_the_policy() -> None:
    objs = _objs({"confirmSource": {"tokenSecret": "prom-token", "caConfigMap": "prom-ca"}})
    confirm = build_settings(_policy(objs), environ={}).confirm
    assert (confirm.token_file, confirm.ca_file) == ("/etc/gpu-reactor/prometheus-token/token",
                                                    "/etc/gpu-reactor/prometheus-ca/ca.crt")
    spec = objs[("Deployment", NAMESPACE, "gpu-reactor")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["prometheus-token"]["secret"]["secretName"] == "prom-token"
    assert volumes["prometheus-ca"]["configMap"]["name"] == "prom-ca"
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["prometheus-token"]["mountPath"] == "/etc/gpu-reactor/prometheus-token"
    assert mounts["prometheus-token"]["readOnly"] and "subPath" not in mounts["prometheus-token"]


def test_the_optional_alertmanager_ingress_policy_admits_prometheus_and_the_reactor_only() -> None:
    objs = _objs({"networkPolicy": {"alertmanagerIngress": {"enabled": True}}})
    policy = objs[("NetworkPolicy", "monitoring", "gpu-reactor-alertmanager-ingress")]
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchExpressions"][0]["values"] == ["alertmanager"]
    api, gossip = spec["ingress"]
    assert api["ports"] == [{"protocol": "TCP", "port": 9093}]
    peers = api["from"]
    assert peers[0]["podSelector"]["matchExpressions"][0]["values"] == ["prometheus"]
    assert peers[1]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": NAMESPACE}
    assert peers[1]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "gpu-reactor"
    assert len(peers) == 2
    assert {p["port"] for p in gossip["ports"]} == {9094}
    assert gossip["from"][0]["podSelector"]["matchExpressions"][0]["values"] == ["alertmanager"]
