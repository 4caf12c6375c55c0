"""The gpu-reactor and gpu-reactor-base charts: lint, render, Kubernetes schemas, values schema, options."""

from __future__ import annotations

import base64
import json
from typing import Any

import helm_python
import pytest
import yaml

from reactor.config.settings import build_settings
from tests.deploy.deploy_helpers import DEPLOY, ROOT
from tests.deploy.test_deploy_build import VERSIONS, _validate
from tests.helm.charts import BASE_CHART, CHART, NAMESPACE, by_key, notes, render

# Custom resources: no bundled schema (their shape is checked below).
CRDS = {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}
ALL_ON: dict[str, Any] = {
    "namespace": {"create": True}, "webhookToken": {"create": True, "value": "t" * 64},
    "stateKey": {"create": True, "value": "k" * 64},
    "serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
    "alertmanagerConfig": {"enabled": True}, "dashboard": {"enabled": True},
    "policy": {"namespaces": {"allow": ["team-a", "team-b", "team-c"]}},
    "image": {"repository": "registry.example.com/gpu-reactor", "tag": "9.9.9"},
    "networkPolicy": {"apiServerCIDRs": ["192.0.2.10/32"], "apiServerPorts": [443]},
}


def _deployment(values: dict[str, Any]) -> dict[str, Any]:
    return by_key(render(values))[("Deployment", NAMESPACE, "gpu-reactor")]


def _token(values: dict[str, Any]) -> bytes:
    return base64.b64decode(by_key(render(values))[("Secret", NAMESPACE, "gpu-reactor-webhook-token")]["data"]["token"])


@pytest.mark.parametrize("chart", [CHART, BASE_CHART], ids=lambda c: c.name)
def test_lint_reports_no_error_or_warning(chart: Any) -> None:
    report = helm_python.lint(str(chart), strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert (report["errors"], problems) == ([], []), report


def test_lint_with_every_option_on_reports_no_error_or_warning() -> None:
    report = helm_python.lint(str(CHART), values=ALL_ON, strict=True, namespace=NAMESPACE)
    assert (report["errors"], [m for m in report["messages"] if m["severity"] >= 2]) == ([], []), report


def test_lint_catches_a_broken_template(tmp_path: Any) -> None:
    """The lint really lints: a chart with an unclosed action is an error."""
    broken = tmp_path / "broken"
    (broken / "templates").mkdir(parents=True)
    (broken / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.1.0\n")
    (broken / "templates" / "cm.yaml").write_text("kind: ConfigMap\nname: {{ .Values.x\n")
    report = helm_python.lint(str(broken))
    assert any(m["severity"] == 3 for m in report["messages"]) or report["errors"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-options"])
def test_every_object_is_valid_for_kubernetes(values: dict[str, Any], version: str) -> None:
    objs = render(values) + render(chart=BASE_CHART)
    assert objs
    for obj in objs:
        if obj["kind"] not in CRDS:
            _validate(obj, version)


def test_defaults_render_the_reactor_and_nothing_optional() -> None:
    kinds = sorted(o["kind"] for o in render())
    assert kinds == sorted(["ServiceAccount", "ClusterRole", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
                            "ClusterRole", "RoleBinding",  # the operators' resources (adapters.builtin)
                            "Role", "RoleBinding",
                            "ConfigMap", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"])


def test_all_options_render_every_part() -> None:
    objs = by_key(render(ALL_ON))
    assert {k[0] for k in objs} >= {"Namespace", "Secret", "ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}
    deployment = objs[("Deployment", NAMESPACE, "gpu-reactor")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/gpu-reactor:9.9.9"
    egress = objs[("NetworkPolicy", NAMESPACE, "gpu-reactor")]["spec"]["egress"][1]
    assert egress == {"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}


def test_the_image_defaults_to_the_app_version_and_a_digest_wins() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in pyproject, "the chart's appVersion follows pyproject.toml"
    image = lambda v: _deployment(v)["spec"]["template"]["spec"]["containers"][0]["image"]  # noqa: E731
    assert image({}) == f"ghcr.io/gpu-reactor/gpu-reactor:{chart['appVersion']}"
    digest = "sha256:" + "a" * 64
    assert image({"image": {"digest": digest}}) == f"ghcr.io/gpu-reactor/gpu-reactor@{digest}"


def test_the_rendered_policy_is_a_valid_reactor_policy() -> None:
    for values in ({}, ALL_ON):
        cm = by_key(render(values))[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]
        settings = build_settings(yaml.safe_load(cm["data"]["policy.yaml"]), environ={})
        assert settings.server.token_file == "/etc/gpu-reactor/token/token"
        allow = values.get("policy", {}).get("namespaces", {}).get("allow", ["ml-workloads"])
        assert list(settings.policy.allow) == allow


def test_the_release_namespace_is_always_denied() -> None:
    values = {"policy": {"namespaces": {"allow": ["team-a"], "deny": ["kube-system"]}}}
    cm = by_key(render(values, namespace="reactor-x"))[("ConfigMap", "reactor-x", "gpu-reactor-policy")]
    namespaces = yaml.safe_load(cm["data"]["policy.yaml"])["namespaces"]
    assert namespaces == {"allow": ["team-a"], "deny": ["kube-system", "reactor-x"]}


def test_a_policy_change_rolls_the_pods() -> None:
    checksum = lambda v: _deployment(v)["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]  # noqa: E731
    assert checksum({}) != checksum({"policy": {"dryRun": True}})


def test_the_token_secret_created_from_a_value() -> None:
    assert _token({"webhookToken": {"create": True, "value": "s3cret"}}) == b"s3cret"


@pytest.mark.parametrize("secret", ["webhookToken", "stateKey"])
def test_create_without_a_value_fails_an_offline_render(secret: str) -> None:
    """`lookup` returns nothing offline (helm template, Argo CD): a random value would change on every render
    (the state key rotating silently), so the render stops and names the GitOps path."""
    with pytest.raises(helm_python.HelmError, match=f"{secret}.create would generate .* {secret}.existingSecret"):
        render({secret: {"create": True}})


def test_the_state_key_secret_created_from_a_value() -> None:
    secret = by_key(render({"stateKey": {"create": True, "value": "k" * 40}}))[
        ("Secret", NAMESPACE, "gpu-reactor-state-key")]
    assert secret["data"] == {"key": base64.b64encode(b"k" * 40).decode()}


def test_a_short_state_key_value_is_refused() -> None:
    with pytest.raises(helm_python.HelmError, match="/stateKey/value"):
        render({"stateKey": {"create": True, "value": "short"}})


README_VALUES: dict[str, Any] = {
    "webhookToken": {"create": True, "value": "s3cret"},
    "alertmanagerConfig": {"enabled": True, "namespace": "monitoring", "tokenSecret": "gpu-reactor-webhook-token"},
}


@pytest.mark.parametrize("token_secret", ["gpu-reactor-webhook-token", ""], ids=["readme", "default-name"])
def test_the_token_secret_is_where_the_alertmanagerconfig_is(token_secret: str) -> None:
    """README's values: the AlertmanagerConfig in `monitoring` finds the token Secret in `monitoring`
    (prometheus-operator reads a receiver's credentials from the AlertmanagerConfig's namespace only)."""
    values = {**README_VALUES, "alertmanagerConfig": {**README_VALUES["alertmanagerConfig"],
                                                      "tokenSecret": token_secret}}
    objs = by_key(render(values))
    spec = objs[("AlertmanagerConfig", "monitoring", "gpu-reactor")]["spec"]
    ref = spec["receivers"][0]["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"]
    copy = objs[("Secret", "monitoring", ref["name"])]
    original = objs[("Secret", NAMESPACE, "gpu-reactor-webhook-token")]
    assert copy["data"][ref["key"]] == original["data"]["token"] == base64.b64encode(b"s3cret").decode()


def test_an_existing_token_secret_elsewhere_fails_with_the_copy_command() -> None:
    values = {"webhookToken": {"existingSecret": "my-token"},
              "alertmanagerConfig": {"enabled": True, "namespace": "monitoring"}}
    with pytest.raises(helm_python.HelmError) as e:
        render(values)
    command = ("kubectl -n monitoring create secret generic my-token --from-literal=token=\"$(kubectl -n gpu-reactor "
               "get secret my-token -o jsonpath='{.data.token}' | base64 -d)\"")
    assert command in str(e.value) and "alertmanagerConfig.tokenSecret=my-token" in str(e.value)
    copied = by_key(render({**values, "alertmanagerConfig": {"enabled": True, "namespace": "monitoring",
                                                             "tokenSecret": "my-token"}}))
    assert not [k for k in copied if k[0] == "Secret"]


def test_the_same_namespace_needs_no_copy() -> None:
    objs = render({"webhookToken": {"create": True, "value": "x"}, "alertmanagerConfig": {"enabled": True}})
    assert [o["metadata"]["namespace"] for o in objs if o["kind"] == "Secret"] == [NAMESPACE]


def test_an_existing_secret_is_mounted_and_none_created() -> None:
    objs = render({"webhookToken": {"existingSecret": "my-token"}, "stateKey": {"existingSecret": "my-key"}})
    assert not [o for o in objs if o["kind"] == "Secret"]
    pod = by_key(objs)[("Deployment", NAMESPACE, "gpu-reactor")]["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"webhook-token": "my-token", "state-key": "my-key"}
    assert "kubectl" not in notes({"webhookToken": {"existingSecret": "my-token"}, "stateKey": {"existingSecret": "k"}})


def test_the_state_key_is_mounted_where_the_reactor_reads_it() -> None:
    (container,) = by_key(render())[("Deployment", NAMESPACE, "gpu-reactor")]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "state-key"]
    assert env["REACTOR_STATE__KEY_FILE"] == mount["mountPath"] + "/key" and mount["readOnly"] is True
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8080, "metrics": 8081}
    policy = yaml.safe_load(by_key(render())[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]["data"]["policy.yaml"])
    assert policy["server"]["probeListen"] == "0.0.0.0:8081"  # the port the probes and the ServiceMonitor use


@pytest.mark.parametrize("values, message", [
    ({"policy": {"namespaces": {"allow": ["Not_A_Namespace"]}}}, "/policy/namespaces/allow/0"),
    ({"networkPolicy": {"apiServerCIDRs": ["10.0.0.1"]}}, "/networkPolicy/apiServerCIDRs/0"),
    ({"replicaCount": "two"}, "/replicaCount"),
    ({"serviceMontor": {"enabled": True}}, "serviceMontor"),
    ({"policy": {"server": {"tokenFile": "/x"}}}, "/policy/server/tokenFile"),
    ({"webhookToken": {"create": True, "existingSecret": "x"}}, "either create or existingSecret"),
    ({"policy": {"namespaces": {"allow": ["ml", "gpu-reactor"]}}}, "must not list the reactor's own namespace"),
], ids=["namespace-name", "cidr", "type", "misspelled-key", "chart-owned-key", "token-both", "own-namespace"])
def test_bad_values_are_refused_with_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmError, match=message.replace("/", "/")):
        render(values)


def test_servicemonitor_and_rule_carry_the_release_label() -> None:
    values = {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
              "prometheusRule": {"enabled": True, "labels": {"release": "prom"}, "namespace": "monitoring"}}
    objs = by_key(render(values))
    monitor = objs[("ServiceMonitor", NAMESPACE, "gpu-reactor")]
    rule = objs[("PrometheusRule", "monitoring", "gpu-reactor")]
    assert monitor["metadata"]["labels"]["release"] == rule["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    service = objs[("Service", NAMESPACE, "gpu-reactor")]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_the_rule_is_the_rendered_rule_file() -> None:
    rule = by_key(render({"prometheusRule": {"enabled": True}}))[("PrometheusRule", NAMESPACE, "gpu-reactor")]
    assert rule["spec"] == yaml.safe_load((ROOT / "rules" / "gpu-reactor.rules.yaml").read_text())


def test_the_runbook_url_is_a_value() -> None:
    base = "https://git.example.com/ops/gpu-reactor/docs/runbooks.md"
    objs = by_key(render({"prometheusRule": {"enabled": True, "runbookUrl": base}}))
    rule = objs[("PrometheusRule", NAMESPACE, "gpu-reactor")]
    rules = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert rules and all(r["annotations"]["runbook_url"] == f"{base}#{r['alert'].lower()}" for r in rules)


def test_the_dashboard_configmap_holds_the_dashboard_with_the_sidecar_label() -> None:
    cm = by_key(render())[("ConfigMap", NAMESPACE, "gpu-reactor-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    committed = json.loads((DEPLOY / "grafana" / "gpu-reactor-dashboard.json").read_text())
    assert json.loads(cm["data"]["gpu-reactor-dashboard.json"]) == committed


def test_the_alertmanagerconfig_routes_reactor_gpu_to_the_service_with_the_token() -> None:
    objs = by_key(render({"alertmanagerConfig": {"enabled": True, "namespace": "monitoring", "tokenSecret": "copied"}}))
    spec = objs[("AlertmanagerConfig", "monitoring", "gpu-reactor")]["spec"]
    assert spec["route"]["matchers"] == [{"name": "reactor", "value": "gpu", "matchType": "="}]
    assert spec["route"]["groupBy"] == ["namespace", "alertname"]
    (hook,) = spec["receivers"][0]["webhookConfigs"]
    assert hook["url"] == "http://gpu-reactor.gpu-reactor.svc:8080/alerts"
    assert hook["httpConfig"]["authorization"]["credentials"] == {"name": "copied", "key": "token"}
    assert (hook["sendResolved"], hook["maxAlerts"]) == (True, 0)
    template = (CHART / "templates" / "alertmanagerconfig.yaml").read_text()
    assert "alertmanagerConfigMatcherStrategy" in template and "type: None" in template


def test_a_second_release_gets_its_own_names() -> None:
    values = {"policy": {"namespaces": {"allow": ["team-a"]}}}
    objs = by_key(render(values, release="staging", namespace="reactor-staging"))
    assert ("Deployment", "reactor-staging", "staging-gpu-reactor") in objs
    binding = objs[("RoleBinding", "team-a", "staging-gpu-reactor")]
    subject = {"kind": "ServiceAccount", "name": "staging-gpu-reactor", "namespace": "reactor-staging"}
    assert binding["subjects"] == [subject]
    assert binding["roleRef"]["name"] == "staging-gpu-reactor-workloads"


def test_seeding_the_embedded_cluster_skips_the_charts() -> None:
    """`reactor sim --seed deploy` walks deploy/: a chart's templates are not manifests until rendered."""
    from reactor_sim import manifests

    assert manifests.read(DEPLOY / "helm") == []


def test_base_chart_serves_many_namespaces_and_amd() -> None:
    values = {"gpuResource": "amd.com/gpu", "namespaces": [{"name": "a", "create": True, "quotaGpus": 4, "maxGpus": 2},
                                                           {"name": "b", "quotaGpus": 8}]}
    objs = by_key(render(values, chart=BASE_CHART))
    assert objs[("ResourceQuota", "a", "gpu-quota")]["spec"]["hard"] == {"requests.amd.com/gpu": "4"}
    assert objs[("LimitRange", "a", "gpu-limits")]["spec"]["limits"][0]["max"] == {"amd.com/gpu": "2"}
    assert ("Namespace", None, "b") not in objs and ("LimitRange", "b", "gpu-limits") not in objs
    assert len([k for k in objs if k[0] == "PriorityClass"]) == 3


@pytest.mark.parametrize(
    ("alerts", "cpu", "granted"),
    [
        pytest.param({}, {}, True, id="defaults-cpu-and-memory"),
        pytest.param({"GPUStarvedByCPU": ["hold"]}, {}, True, id="memory-only"),
        pytest.param({"GPUContainerNearMemoryLimit": ["hold"]}, {}, True, id="cpu-only"),
        pytest.param({"GPUStarvedByCPU": ["hold"], "GPUContainerNearMemoryLimit": ["hold"]}, {}, False, id="neither"),
        pytest.param({}, {"applyTo": "template"}, False, id="template-only"),
    ],
)
def test_the_pods_resize_grant_follows_cpu_and_memory_actions(alerts: dict[str, Any], cpu: dict[str, Any],
                                                              granted: bool) -> None:
    """As Policy.resizes_pods_in_place: resize-cpu-up or resize-memory-up on some alert, applyTo not template (an
    alert the policy leaves out keeps its default strategies: `hold` turns one off)."""
    values = {"policy": {"namespaces": {"allow": ["team-a"]}, "alerts": alerts, "cpu": cpu}}
    objs = by_key(render(values))
    role = objs[("ClusterRole", None, "gpu-reactor-workloads")]
    rules = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert (("", "pods/resize") in rules) is granted
    policy = yaml.safe_load(objs[("ConfigMap", NAMESPACE, "gpu-reactor-policy")]["data"]["policy.yaml"])
    assert build_settings(policy, {}).policy.resizes_pods_in_place is granted


def test_allow_star_binds_the_roles_cluster_wide() -> None:
    """`allow: ["*"]` (every namespace the policy does not deny, Policy.namespace_allowed) cannot be a RoleBinding per
    namespace: the workloads and operators roles get a ClusterRoleBinding each, and no RoleBinding names `*`."""
    objs = by_key(render({"policy": {"namespaces": {"allow": ["*"]}}}))
    assert not [k for k in objs if k[0] == "RoleBinding" and k[1] != NAMESPACE]
    for role in ("workloads", "operators"):
        binding = objs[("ClusterRoleBinding", None, f"gpu-reactor-{role}")]
        assert binding["roleRef"]["name"] == f"gpu-reactor-{role}"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-reactor", "namespace": NAMESPACE}]


def _readme_values(page: str) -> dict[str, Any]:
    """The `my-values.yaml` block of a page: the README's install, docs/deploy.md's Helm section."""
    text = (ROOT / page).read_text()
    start = text.index("# my-values.yaml\n")
    return dict(yaml.safe_load(text[start:text.index("```", start)]))


@pytest.mark.parametrize("page", ["README.md", "docs/deploy.md"])
def test_the_readme_values_deliver(page: str) -> None:
    """As `helm install` renders them (online: `lookup` finds the cluster, stood in for here by explicit values),
    the AlertmanagerConfig in `monitoring` names a Secret that is in `monitoring`, holding the reactor's token.
    Offline (`helm template`, lookup empty) the same values fail and name the GitOps path."""
    values = _readme_values(page)
    with pytest.raises(helm_python.HelmError, match="existingSecret"):
        render(values)
    values["webhookToken"]["value"], values["stateKey"]["value"] = "t" * 64, "k" * 64
    objs = by_key(render(values))
    am = values["alertmanagerConfig"]["namespace"]
    (config,) = [o for o in objs.values() if o["kind"] == "AlertmanagerConfig"]
    assert config["metadata"]["namespace"] == am
    ref = config["spec"]["receivers"][0]["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"]
    assert objs[("Secret", am, ref["name"])]["data"]["token"] == base64.b64encode(b"t" * 64).decode()
