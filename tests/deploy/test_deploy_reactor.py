"""The reactor's own manifests: security invariants, RBAC equal to what the code calls, the policy."""

from __future__ import annotations

import tomllib
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from reactor.config.settings import Settings, build_settings, load_settings
from tests.deploy.deploy_helpers import DEPLOY, ROOT, objects, one, render

SA = {"kind": "ServiceAccount", "name": "gpu-reactor", "namespace": "gpu-reactor"}
POD_LABELS = {"app.kubernetes.io/name": "gpu-reactor", "app.kubernetes.io/component": "server"}

# The complete list of API calls the reactor makes (apiGroup, resource) -> verbs.
# Change it only together with the code and deploy/reactor/rbac-*.yaml.
NAMESPACED_CALLS: dict[tuple[str, str], set[str]] = {  # list+watch of the cached kinds: kube.watchCache
    ("", "pods"): {"get", "list"},
    ("", "limitranges"): {"list", "watch"},
    ("", "resourcequotas"): {"list", "watch"},
    ("", "events"): {"create", "patch"},  # patch: a repeat counted on the first Event (act/posting.py)
    ("", "pods/resize"): {"patch"},  # CPU actions in place (see test_the_pods_resize_grant_follows_the_policy)
    ("apps", "replicasets"): {"get", "list", "watch"},
    ("apps", "deployments"): {"get", "list", "watch", "patch"},
    ("apps", "statefulsets"): {"get", "list", "watch", "patch"},
    ("batch", "jobs"): {"get", "list", "watch"},
    ("batch", "cronjobs"): {"get", "list", "watch", "patch"},
    ("autoscaling", "horizontalpodautoscalers"): {"list", "watch"},
    ("kueue.x-k8s.io", "localqueues"): {"get"},
}
CLUSTER_CALLS: dict[tuple[str, str], set[str]] = {("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
                                                  ("kueue.x-k8s.io", "clusterqueues"): {"get"},
                                                  ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list"}}
READ_VERBS = {"get", "list", "watch"}


@pytest.fixture(scope="module")
def objs() -> list[dict[str, Any]]:
    return objects("reactor")


@pytest.fixture(scope="module")
def deployment(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objs, "Deployment", "gpu-reactor")


@pytest.fixture(scope="module")
def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def container(pod: dict[str, Any]) -> dict[str, Any]:
    (c,) = pod["containers"]
    return c


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(DEPLOY / "reactor" / "policy.yaml", environ={})


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    table: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule, "no non-resource grants are needed (/version is public to authenticated users)"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                table.setdefault((group, resource), set()).update(rule["verbs"])
    return table


# --- policy ---------------------------------------------------------------------------------


def test_policy_file_validates(settings: Settings) -> None:
    assert settings.policy.allow == ("ml-workloads",)
    assert settings.server.listen.endswith(":8080")
    assert settings.server.probe_listen.endswith(":8081")


def test_rendered_configmap_holds_the_same_valid_policy() -> None:
    cm = one(render("reactor"), "ConfigMap", "gpu-reactor-policy")
    assert cm["metadata"]["namespace"] == "gpu-reactor"
    assert set(cm["data"]) == {"policy.yaml"}
    doc = yaml.safe_load(cm["data"]["policy.yaml"])
    assert build_settings(doc, environ={}) == load_settings(DEPLOY / "reactor" / "policy.yaml", environ={})


def test_policy_keeps_the_reactor_out_of_system_and_its_own_namespaces(settings: Settings) -> None:
    for ns in ("kube-system", "kube-public", "kube-node-lease", "gpu-reactor"):
        assert not settings.policy.namespace_allowed(ns)
    assert "*" not in settings.policy.allow


def test_policy_ladder_names_existing_priority_classes_lowest_first(settings: Settings) -> None:
    values = {o["metadata"]["name"]: o["value"] for o in objects("base") if o["kind"] == "PriorityClass"}
    ladder = settings.policy.priority_ladder
    assert set(ladder) <= set(values)
    assert [values[c] for c in ladder] == sorted(values[c] for c in ladder)


def test_token_file_is_the_mounted_secret_key(settings: Settings, pod: dict[str, Any], container: dict[str, Any]) -> None:
    (vol,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "gpu-reactor-webhook-token"]
    secret = vol["secret"]
    assert secret.get("optional", False) is False
    (item,) = secret["items"]
    assert item["key"] == "token"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == vol["name"]]
    assert mount["readOnly"] is True
    assert settings.server.token_file == str(PurePosixPath(mount["mountPath"]) / item["path"]) == "/etc/gpu-reactor/token/token"


def test_state_key_is_the_mounted_secret(pod: dict[str, Any], container: dict[str, Any]) -> None:
    """The HMAC key of the state annotations: Secret gpu-reactor-state-key, data `key` (and `previous` while
    rotating), mounted read-only where REACTOR_STATE__KEY_FILE points, and the settings load from that env."""
    (vol,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "gpu-reactor-state-key"]
    assert vol["secret"].get("optional", False) is False and "items" not in vol["secret"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == vol["name"]]
    assert mount["readOnly"] is True and mount["mountPath"] == "/var/run/gpu-reactor/state"
    env = {e["name"]: e["value"] for e in container["env"]}
    settings = load_settings(DEPLOY / "reactor" / "policy.yaml", environ=env)
    assert settings.server.state_key_file == "/var/run/gpu-reactor/state/key"
    assert settings.server.state_previous_key_file == "/var/run/gpu-reactor/state/previous"


def test_policy_is_mounted_where_the_args_point(pod: dict[str, Any], container: dict[str, Any]) -> None:
    assert container["args"] == ["serve", "--config", "/etc/gpu-reactor/policy.yaml"]
    (vol,) = [v for v in pod["volumes"] if "configMap" in v]
    assert vol["configMap"]["name"] == "gpu-reactor-policy"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == vol["name"]]
    assert mount["mountPath"] == "/etc/gpu-reactor/policy.yaml" and mount["subPath"] == "policy.yaml"


def test_no_secret_value_is_committed() -> None:
    for top in ("base", "reactor", "examples"):
        for path in (DEPLOY / top).rglob("*.yaml"):
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                assert not (doc and doc.get("kind") == "Secret"), f"{path} commits a Secret"


# --- the Deployment -------------------------------------------------------------------------


def test_two_replicas_with_a_pdb_keeping_one(objs: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    assert deployment["spec"]["replicas"] == 2
    pdb = one(objs, "PodDisruptionBudget", "gpu-reactor")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= POD_LABELS.items()


def test_pods_run_as_non_root_with_a_read_only_root(pod: dict[str, Any], container: dict[str, Any]) -> None:
    psc, csc = pod["securityContext"], container["securityContext"]
    assert psc["runAsNonRoot"] is True and csc["runAsNonRoot"] is True
    assert isinstance(psc["runAsUser"], int) and psc["runAsUser"] > 0
    assert csc.get("runAsUser", psc["runAsUser"]) == psc["runAsUser"]
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["allowPrivilegeEscalation"] is False
    assert csc.get("privileged", False) is False
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"} == csc["seccompProfile"]


def test_writable_tmp_is_an_empty_dir(pod: dict[str, Any], container: dict[str, Any]) -> None:
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in vol


def test_probes_and_port(container: dict[str, Any]) -> None:
    """The webhook on `http` (8080); the probes and /metrics on `metrics` (8081, server.probeListen), which
    no webhook client can starve."""
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": 8081, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_resources_are_bounded(container: dict[str, Any]) -> None:
    res = container["resources"]
    assert {"cpu", "memory"} <= set(res["requests"]) and {"cpu", "memory"} <= set(res["limits"])


def test_service_account_with_api_token(objs: list[dict[str, Any]], pod: dict[str, Any]) -> None:
    one(objs, "ServiceAccount", "gpu-reactor")
    assert pod["serviceAccountName"] == "gpu-reactor"
    assert pod["automountServiceAccountToken"] is True


def test_replicas_spread_over_nodes(pod: dict[str, Any]) -> None:
    spreads = pod.get("topologySpreadConstraints", [])
    hard = [s for s in spreads if s["topologyKey"] == "kubernetes.io/hostname" and s["whenUnsatisfiable"] == "DoNotSchedule"]
    assert hard and hard[0]["maxSkew"] == 1
    assert hard[0]["labelSelector"]["matchLabels"].items() <= POD_LABELS.items()


def test_image_tag_is_the_project_version(container: dict[str, Any]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert container["image"] == f"ghcr.io/gpu-reactor/gpu-reactor:{version}"
    kust = yaml.safe_load((DEPLOY / "reactor" / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": "ghcr.io/gpu-reactor/gpu-reactor", "newTag": version}]


def test_service_reaches_the_pods_on_8080_and_8081(objs: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    svc = one(objs, "Service", "gpu-reactor")
    assert svc["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"},
                                    {"name": "metrics", "port": 8081, "targetPort": "metrics", "protocol": "TCP"}]


def test_every_namespaced_object_names_its_namespace() -> None:
    """deploy/reactor sets no kustomize namespace (it would move the RoleBindings), so each file must."""
    cluster_kinds = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
    for obj in render("reactor"):
        if obj["kind"] not in cluster_kinds:
            assert obj["metadata"].get("namespace"), f"{obj['kind']}/{obj['metadata']['name']} has no namespace"


# --- NetworkPolicy --------------------------------------------------------------------------


def test_network_policy_admits_only_alertmanager_and_prometheus(objs: list[dict[str, Any]]) -> None:
    """Alertmanager reaches the webhook (8080) only, Prometheus the metrics port (8081) only."""
    np = one(objs, "NetworkPolicy", "gpu-reactor")["spec"]
    assert np["podSelector"]["matchLabels"].items() <= POD_LABELS.items()
    assert set(np["policyTypes"]) == {"Ingress", "Egress"}
    admitted = {}
    for ingress in np["ingress"]:
        (peer,) = ingress["from"]
        assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
        (expr,) = peer["podSelector"]["matchExpressions"]
        assert (expr["key"], expr["operator"]) == ("app.kubernetes.io/name", "In")
        (port,) = ingress["ports"]
        admitted[port["port"]] = set(expr["values"])
    assert admitted == {8080: {"alertmanager"}, 8081: {"prometheus"}}


def test_network_policy_egress_is_dns_and_api_server_only(objs: list[dict[str, Any]]) -> None:
    egress = one(objs, "NetworkPolicy", "gpu-reactor")["spec"]["egress"]
    ports = []
    for rule in egress:
        assert rule.get("to") and rule.get("ports"), "an egress rule without peers or ports allows everything"
        ports.extend((p["protocol"], p["port"]) for p in rule["ports"])
        for peer in rule["to"]:
            if "ipBlock" in peer:
                assert peer["ipBlock"]["cidr"] != "0.0.0.0/0"
    assert set(ports) == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6443), ("TCP", 9090)}  # 9090: confirm


# --- RBAC -----------------------------------------------------------------------------------


def test_workload_rules_are_exactly_the_calls_the_code_makes(objs: list[dict[str, Any]]) -> None:
    assert _rules(one(objs, "ClusterRole", "gpu-reactor-workloads")) == NAMESPACED_CALLS


def test_the_pods_resize_grant_follows_the_policy(objs: list[dict[str, Any]]) -> None:
    """pods/resize patch is granted exactly when the deployed policy resizes running pods' CPU."""
    from reactor.config.settings import load_settings

    policy = load_settings(DEPLOY / "reactor" / "policy.yaml", {}).policy
    granted = ("", "pods/resize") in _rules(one(objs, "ClusterRole", "gpu-reactor-workloads"))
    assert granted == policy.resizes_pods_in_place


def test_cluster_rules_are_exactly_listing_priority_classes(objs: list[dict[str, Any]]) -> None:
    assert _rules(one(objs, "ClusterRole", "gpu-reactor-priorityclasses")) == CLUSTER_CALLS


def test_no_other_roles(objs: list[dict[str, Any]]) -> None:
    roles = {(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in {"Role", "ClusterRole"}}
    assert roles == {("ClusterRole", "gpu-reactor-workloads"), ("ClusterRole", "gpu-reactor-priorityclasses"),
                     ("ClusterRole", "gpu-reactor-operators"),
                     ("Role", "gpu-reactor-verifier")}


def test_the_verifier_role_touches_one_lease_in_the_reactors_namespace(objs: list[dict[str, Any]]) -> None:
    """get/update only on the Lease the policy names; create cannot be limited by name (authorized before the
    object has one); bound in gpu-reactor only, to the reactor's ServiceAccount."""
    role = one(objs, "Role", "gpu-reactor-verifier")
    assert role["metadata"]["namespace"] == "gpu-reactor"
    assert [(r["resources"], r["verbs"], r.get("resourceNames")) for r in role["rules"]] == [
        (["leases"], ["create"], None), (["leases"], ["get", "update"], ["gpu-reactor-verifier", "gpu-reactor-state"])]
    binding = one(objs, "RoleBinding", "gpu-reactor-verifier")
    assert (binding["metadata"]["namespace"], binding["subjects"]) == ("gpu-reactor", [SA])


def test_no_wildcards_and_no_secrets(objs: list[dict[str, Any]]) -> None:
    for role in (o for o in objs if o["kind"] in {"Role", "ClusterRole"}):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], f"{role['metadata']['name']}: wildcard in {key}"
            assert not {"secrets", "configmaps", "serviceaccounts/token"} & set(rule["resources"])
            assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"] and "impersonate" not in rule["verbs"]


def test_cluster_wide_bindings_grant_reads_only(objs: list[dict[str, Any]]) -> None:
    roles = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRole"}
    crbs = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in crbs] == ["gpu-reactor-priorityclasses"]
    for binding in crbs:
        for verbs in _rules(roles[binding["roleRef"]["name"]]).values():
            assert verbs <= READ_VERBS


def test_role_bindings_are_namespaced_and_match_the_allow_list(objs: list[dict[str, Any]], settings: Settings) -> None:
    bindings = [o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["name"] != "gpu-reactor-verifier"]
    for role in ("gpu-reactor-workloads", "gpu-reactor-operators"):
        bound = [b for b in bindings if b["roleRef"]["name"] == role]
        for b in bound:
            assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
            assert b["subjects"] == [SA]
        # A namespace in the allow list without a binding gets 403s; a binding without allow is unused power.
        assert {b["metadata"]["namespace"] for b in bound} == set(settings.policy.allow)
    assert {b["roleRef"]["name"] for b in bindings} == {"gpu-reactor-workloads", "gpu-reactor-operators"}


def test_operator_grants_match_the_enabled_adapters(objs: list[dict[str, Any]], settings: Settings) -> None:
    """get/patch on exactly the custom resources whose adapters the policy enables (adapters.builtin), get on
    what the resolver reads on the way to them (KServe's serverless mode: Knative's objects), and get/create/patch
    on Leases where an adapter keeps its state apart (an InferenceService's, README: Operators)."""
    role = one(objs, "ClusterRole", "gpu-reactor-operators")
    granted = {(rule_group, resource): frozenset(rule["verbs"]) for rule in role["rules"]
               for rule_group in rule["apiGroups"] for resource in rule["resources"]}
    enabled = {(a.group, a.plural): frozenset({"get", "patch"}) for a in settings.adapters}
    enabled |= {read: frozenset({"get"}) for a in settings.adapters for read in a.reads}
    if any(a.state_apart for a in settings.adapters):
        enabled[("coordination.k8s.io", "leases")] = frozenset({"get", "create", "patch"})
    assert granted == enabled


def test_rbac_table_guard_catches_an_extra_verb(objs: list[dict[str, Any]]) -> None:
    role = one(objs, "ClusterRole", "gpu-reactor-workloads")
    widened = {**role, "rules": [*role["rules"], {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["delete"]}]}
    assert _rules(widened) != NAMESPACED_CALLS


# --- optional ServiceMonitor (a CRD: no bundled schema, shape checked here) ------------------


def test_service_monitor_scrapes_the_service() -> None:
    (sm,) = objects("reactor/monitoring")
    assert (sm["apiVersion"], sm["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert set(sm) == {"apiVersion", "kind", "metadata", "spec"}
    svc = one(objects("reactor"), "Service", "gpu-reactor")
    assert sm["metadata"]["namespace"] == svc["metadata"]["namespace"]
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [svc["metadata"]["namespace"]]}
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels"}
