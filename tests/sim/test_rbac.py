"""RBAC mode: bearer tokens name users, and Roles/ClusterRoles with their bindings decide each request,
with the Status bodies of kube-apiserver's authentication and authorization filters
(k8s.io/apiserver responsewriters.Forbidden, plugin/pkg/auth/authorizer/rbac)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import deployment
from tests.sim.helpers import status_of

SA = "system:serviceaccount:gpu-reactor:gpu-reactor"
TOKEN = "sa-token"
RBAC_V1 = "rbac.authorization.k8s.io/v1"
ROOT = Path(__file__).resolve().parents[2]


def _role(kind: str, name: str, rules: list[dict[str, Any]], ns: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": RBAC_V1, "kind": kind, "metadata": meta, "rules": rules}


def _binding(kind: str, name: str, role_kind: str, role: str, ns: str | None = None,
             subjects: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    subjects = subjects or [{"kind": "ServiceAccount", "name": "gpu-reactor", "namespace": "gpu-reactor"}]
    return {"apiVersion": RBAC_V1, "kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}}


def _grant(sim: SimCluster, rules: list[dict[str, Any]], ns: str = "ml") -> None:
    """A ClusterRole with `rules`, bound to the ServiceAccount in `ns` by a RoleBinding."""
    sim.apply(_role("ClusterRole", "workloads", rules))
    sim.apply(_binding("RoleBinding", "workloads", "ClusterRole", "workloads", ns))


@pytest.fixture
def rsim() -> Iterator[SimCluster]:
    with SimCluster(rbac=True).start() as cluster:
        for ns in ("ml", "other", "gpu-reactor"):
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "gpu-reactor", "namespace": "gpu-reactor"}})
        cluster.apply(deployment(replicas=1))
        cluster.add_token(TOKEN, user=SA)
        yield cluster


def _client(sim: SimCluster, token: str | None) -> k8s.ApiClient:
    config = k8s.Configuration(host=sim.url)
    if token:
        config.api_key = {"BearerToken": token}
        config.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(config)


@pytest.fixture
def sa_apps(rsim: SimCluster) -> Iterator[k8s.AppsV1Api]:
    with _client(rsim, TOKEN) as c:
        yield k8s.AppsV1Api(c)


@pytest.fixture
def sa_core(rsim: SimCluster) -> Iterator[k8s.CoreV1Api]:
    with _client(rsim, TOKEN) as c:
        yield k8s.CoreV1Api(c)


def _raw(sim: SimCluster, path: str, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(sim.url + path, headers=headers)) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# -- authentication ---------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["no-token", "unknown-token"])
def test_a_request_without_a_known_token_is_401_unauthorized(rsim: SimCluster, token: str | None) -> None:
    """WithAuthentication: no credentials (anonymous auth off) or an unknown bearer token is answered
    401 `Unauthorized` with a Status and no details, before any authorization or routing."""
    code, body = _raw(rsim, "/apis/apps/v1/namespaces/ml/deployments", token)
    assert code == 401
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    assert rsim.requests[("list", "deployments", "")] == 1 and not rsim.denied


def test_a_service_account_token_stops_working_when_the_account_is_deleted(rsim: SimCluster) -> None:
    """ServiceAccount tokens are checked against the ServiceAccount object: deleting it makes them 401."""
    assert _raw(rsim, "/version")[0] == 200
    rsim.delete("serviceaccounts", "gpu-reactor", "gpu-reactor")
    assert _raw(rsim, "/version")[0] == 401


def test_service_account_users_carry_the_service_account_groups(rsim: SimCluster, sa_core: k8s.CoreV1Api) -> None:
    """`system:serviceaccount:NS:NAME` is in `system:serviceaccounts`, `system:serviceaccounts:NS` and
    `system:authenticated`: a binding to any of those groups applies to it."""
    for group in ("system:serviceaccounts", "system:serviceaccounts:gpu-reactor", "system:authenticated"):
        rsim.apply(_role("ClusterRole", "read-pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]))
        rsim.apply(_binding("ClusterRoleBinding", "read-pods", "ClusterRole", "read-pods",
                            subjects=[{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}]))
        assert sa_core.list_namespaced_pod("ml").items == []
        rsim.delete("clusterrolebindings", None, "read-pods")
        status_of(lambda: sa_core.list_namespaced_pod("ml"), 403)


def test_add_token_rejects_a_malformed_service_account_user() -> None:
    sim = SimCluster(rbac=True)
    with pytest.raises(ValueError, match="system:serviceaccount:NAMESPACE:NAME"):
        sim.add_token("t", user="system:serviceaccount:only-namespace")
    with pytest.raises(RuntimeError, match="rbac=True"):
        SimCluster().add_token("t", user="alice")


# -- the 403 messages ---------------------------------------------------------------------------------


def test_a_refused_patch_names_user_verb_resource_group_and_namespace(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """responsewriters.Forbidden + NewForbidden: `deployments.apps "web" is forbidden: User "…" cannot patch
    resource "deployments" in API group "apps" in the namespace "ml"`; details name/group/kind (plural)."""
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}])
    assert sa_apps.read_namespaced_deployment("web", "ml").metadata.name == "web"
    body = status_of(lambda: sa_apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}}), 403)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (f'deployments.apps "web" is forbidden: User "{SA}" cannot patch resource "deployments" '
                               'in API group "apps" in the namespace "ml"')
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    assert rsim.get("deployments", "ml", "web")["spec"]["replicas"] == 1
    assert rsim.denied == {("patch", "deployments", ""): 1}


def test_a_refused_list_has_no_name_and_a_core_resource_no_group(sa_core: k8s.CoreV1Api) -> None:
    """A collection: `pods is forbidden: User "…" cannot list resource "pods" in API group "" in the namespace
    "ml"`, details only {kind: pods}."""
    body = status_of(lambda: sa_core.list_namespaced_pod("ml"), 403)
    assert body["message"] == (f'pods is forbidden: User "{SA}" cannot list resource "pods" in API group "" '
                               'in the namespace "ml"')
    assert body["details"] == {"kind": "pods"}


def test_a_refused_cluster_scoped_request_is_at_the_cluster_scope(rsim: SimCluster) -> None:
    """Cluster-scoped: `priorityclasses.scheduling.k8s.io is forbidden: … at the cluster scope`."""
    with _client(rsim, TOKEN) as c:
        body = status_of(lambda: k8s.SchedulingV1Api(c).list_priority_class(), 403)
    assert body["message"] == (f'priorityclasses.scheduling.k8s.io is forbidden: User "{SA}" cannot list resource '
                               '"priorityclasses" in API group "scheduling.k8s.io" at the cluster scope')
    assert body["details"] == {"group": "scheduling.k8s.io", "kind": "priorityclasses"}


def test_a_refused_path_is_forbidden_with_empty_details(rsim: SimCluster) -> None:
    """A non-resource URL nobody granted: `forbidden: User "…" cannot get path "/"`, `details: {}`."""
    code, body = _raw(rsim, "/")
    assert code == 403
    assert body["message"] == f'forbidden: User "{SA}" cannot get path "/"'
    assert body["details"] == {}


def test_a_binding_to_a_missing_role_adds_the_rbac_reason(rsim: SimCluster, sa_core: k8s.CoreV1Api) -> None:
    """The RBAC authorizer's resolution errors become the reason: `…: RBAC: clusterrole.rbac.authorization.k8s.io
    "gone" not found`; two distinct ones are aggregated as `[a, b]`."""
    rsim.apply(_binding("RoleBinding", "a", "ClusterRole", "gone", "ml"))
    body = status_of(lambda: sa_core.list_namespaced_pod("ml"), 403)
    assert body["message"].endswith(' in the namespace "ml": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')
    rsim.apply(_binding("RoleBinding", "b", "Role", "missing", "ml"))
    body = status_of(lambda: sa_core.list_namespaced_pod("ml"), 403)
    assert body["message"].endswith(': RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
                                    'role.rbac.authorization.k8s.io "missing" not found]')


# -- what a rule matches ------------------------------------------------------------------------------


def test_discovery_health_and_version_are_open_to_every_authenticated_user(rsim: SimCluster) -> None:
    """Bootstrap policy: system:discovery and system:public-info-viewer are bound to system:authenticated."""
    for path in ("/version", "/api", "/apis", "/api/v1", "/apis/apps/v1", "/healthz", "/readyz", "/livez"):
        assert _raw(rsim, path)[0] == 200, path
    assert {c["metadata"]["name"] for c in rsim.list("clusterrolebindings")} == {
        "cluster-admin", "system:basic-user", "system:discovery", "system:public-info-viewer"}


def test_a_role_binding_grants_only_in_its_namespace(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """A ClusterRole bound by a RoleBinding in `ml` grants nothing in `other`."""
    rsim.apply(deployment(ns="other"))
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]}])
    sa_apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}})
    body = status_of(lambda: sa_apps.patch_namespaced_deployment("web", "other", {"spec": {"replicas": 2}}), 403)
    assert body["message"].endswith('in the namespace "other"')


def test_a_role_grants_in_its_own_namespace(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """A namespaced Role bound by a RoleBinding of the same namespace (the subject may omit its namespace
    when the ServiceAccount lives there)."""
    rsim.apply(_role("Role", "reader", [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}], "ml"))
    rsim.apply(_binding("RoleBinding", "reader", "Role", "reader", "ml"))
    assert sa_apps.read_namespaced_deployment("web", "ml").metadata.name == "web"


def test_subresources_need_their_own_grant(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """`deployments` does not cover `deployments/scale`; `deployments/scale` or `*/scale` does."""
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]}])
    body = status_of(lambda: sa_apps.patch_namespaced_deployment_scale("web", "ml", {"spec": {"replicas": 2}}), 403)
    assert body["message"] == (f'deployments.apps "web" is forbidden: User "{SA}" cannot patch resource '
                               '"deployments/scale" in API group "apps" in the namespace "ml"')
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    for resource in ("deployments/scale", "*/scale"):
        _grant(rsim, [{"apiGroups": ["apps"], "resources": [resource], "verbs": ["patch"]}])
        assert sa_apps.patch_namespaced_deployment_scale("web", "ml", {"spec": {"replicas": 2}}).spec.replicas == 2


def test_resource_names_limit_a_rule_to_named_objects(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """resourceNames: get of a listed name is allowed, another name and a plain list are not; a list with
    `fieldSelector=metadata.name=web` is authorized as that name."""
    rsim.apply(deployment(name="db"))
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"],
                   "verbs": ["get", "list"]}])
    sa_apps.read_namespaced_deployment("web", "ml")
    status_of(lambda: sa_apps.read_namespaced_deployment("db", "ml"), 403)
    status_of(lambda: sa_apps.list_namespaced_deployment("ml"), 403)
    items = sa_apps.list_namespaced_deployment("ml", field_selector="metadata.name=web").items
    assert [d.metadata.name for d in items] == ["web"]


def test_wildcards_match_any_verb_group_and_resource(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """`*` in verbs, apiGroups and resources (as in cluster-admin) matches everything in scope."""
    _grant(rsim, [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])
    sa_apps.patch_namespaced_deployment_scale("web", "ml", {"spec": {"replicas": 2}})
    sa_apps.delete_namespaced_deployment("web", "ml")


def test_non_resource_urls_match_exactly_or_by_prefix(rsim: SimCluster) -> None:
    """nonResourceURLs `/metrics` matches only itself, `/logs/*` a prefix. Authorization comes before routing:
    an allowed path the server does not serve is a 404, a refused one a 403."""
    rsim.apply(_role("ClusterRole", "paths", [{"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]}]))
    rsim.apply(_binding("ClusterRoleBinding", "paths", "ClusterRole", "paths"))
    assert _raw(rsim, "/metrics")[0] == 404
    assert _raw(rsim, "/logs/kube-apiserver.log")[0] == 404
    assert _raw(rsim, "/metricsz")[0] == 403


def test_an_unknown_resource_is_refused_before_it_is_found_missing(rsim: SimCluster) -> None:
    """The authorization filter runs before the handler: a resource the server does not serve is a 403 for
    a user without a grant, a 404 for one with it."""
    code, body = _raw(rsim, "/apis/example.com/v1/namespaces/ml/widgets")
    assert code == 403
    assert body["message"] == (f'widgets.example.com is forbidden: User "{SA}" cannot list resource "widgets" '
                               'in API group "example.com" in the namespace "ml"')
    _grant(rsim, [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}])
    assert _raw(rsim, "/apis/example.com/v1/namespaces/ml/widgets")[0] == 404


def test_a_changed_role_takes_effect_on_the_next_request(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """Roles are stored objects read on every request: removing a verb refuses the next call."""
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}])
    sa_apps.read_namespaced_deployment("web", "ml")
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}])
    status_of(lambda: sa_apps.read_namespaced_deployment("web", "ml"), 403)


def test_secrets_are_not_readable_without_a_grant(rsim: SimCluster, sa_core: k8s.CoreV1Api) -> None:
    """A ServiceAccount with a grant on other resources still cannot read Secrets."""
    rsim.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ml"},
                "data": {"token": "c2VjcmV0"}})
    _grant(rsim, [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]}])
    body = status_of(lambda: sa_core.read_namespaced_secret("s", "ml"), 403)
    assert body["message"] == (f'secrets "s" is forbidden: User "{SA}" cannot get resource "secrets" in API group "" '
                               'in the namespace "ml"')


# -- the admin ----------------------------------------------------------------------------------------


def test_the_admin_token_in_the_kubeconfig_may_do_anything(rsim: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """write_kubeconfig writes the admin token (group system:masters, allowed before RBAC) by default."""
    from kubernetes import config as k8s_config

    path = rsim.write_kubeconfig(tmp_path / "kubeconfig")
    assert rsim.admin_token and rsim.admin_token in (tmp_path / "kubeconfig").read_text()
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=path, client_configuration=config)
    with k8s.ApiClient(config) as c:
        k8s.AppsV1Api(c).patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 3}})
        roles = k8s.RbacAuthorizationV1Api(c).list_cluster_role().items
    assert "cluster-admin" in {r.metadata.name for r in roles}
    assert not rsim.denied


def test_roles_created_over_the_api_are_enforced(rsim: SimCluster, sa_apps: k8s.AppsV1Api) -> None:
    """Roles and bindings are ordinary rbac.authorization.k8s.io/v1 objects: created by the admin through
    the API, they grant at once."""
    with _client(rsim, rsim.admin_token) as c:
        rbac = k8s.RbacAuthorizationV1Api(c)
        rbac.create_namespaced_role("ml", _role("Role", "r", [{"apiGroups": ["apps"], "resources": ["deployments"],
                                                                "verbs": ["list"]}], "ml"))
        rbac.create_namespaced_role_binding("ml", _binding("RoleBinding", "r", "Role", "r", "ml"))
    assert [d.metadata.name for d in sa_apps.list_namespaced_deployment("ml").items] == ["web"]


# -- SelfSubjectAccessReview, TLS and kubectl -----------------------------------------------------------


def test_a_self_subject_access_review_answers_for_the_caller(rsim: SimCluster) -> None:
    """POST selfsubjectaccessreviews (`kubectl auth can-i`): status.allowed for the caller's own user, with the
    RBAC authorizer's reason naming the binding that allowed it; no 403 for asking."""
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}])

    def review(attributes: dict[str, str]) -> Any:
        with _client(rsim, TOKEN) as c:
            return k8s.AuthorizationV1Api(c).create_self_subject_access_review(
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                 "spec": {"resourceAttributes": attributes}}).status
    allowed = review({"namespace": "ml", "verb": "patch", "group": "apps", "resource": "deployments"})
    assert allowed.allowed is True
    assert allowed.reason == ('RBAC: allowed by RoleBinding "workloads/ml" of ClusterRole "workloads" to '
                              'ServiceAccount "gpu-reactor/gpu-reactor"')
    refused = review({"namespace": "ml", "verb": "get", "resource": "secrets"})
    assert (refused.allowed, refused.reason) == (False, None)
    assert not rsim.denied


def test_without_rbac_every_review_is_allowed(sim: SimCluster, client: k8s.ApiClient) -> None:
    status = k8s.AuthorizationV1Api(client).create_self_subject_access_review(
        {"spec": {"nonResourceAttributes": {"path": "/anything", "verb": "get"}}}).status
    assert status.allowed is True


def test_tls_serves_https_with_a_ca_in_the_kubeconfig(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """start(tls=True): https with a self-signed certificate for 127.0.0.1; write_kubeconfig embeds it as
    certificate-authority-data, so the official client verifies the server."""
    from kubernetes import config as k8s_config

    with SimCluster(rbac=True).start(tls=True) as sim:
        assert sim.url.startswith("https://127.0.0.1:") and sim.ca_file
        config = k8s.Configuration()
        k8s_config.load_kube_config(config_file=sim.write_kubeconfig(tmp_path / "kc"), client_configuration=config)
        with k8s.ApiClient(config) as c:
            assert "default" in {n.metadata.name for n in k8s.CoreV1Api(c).list_namespace().items}
        unverified = k8s.Configuration(host=sim.url)
        unverified.retries = False
        with k8s.ApiClient(unverified) as c, pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            k8s.CoreV1Api(c).list_namespace()


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_with_rbac(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kubectl sends a kubeconfig's token only over https: with tls the admin kubeconfig applies a kustomization
    (`--validate=false`: no OpenAPI document is served), a ServiceAccount's kubeconfig gets the upstream
    Forbidden message, and `kubectl auth can-i` (a protobuf SelfSubjectAccessReview) answers yes/no."""
    with SimCluster(rbac=True).start(tls=True) as sim:
        sim.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gpu-reactor", "namespace": "default"}})
        sim.add_token(TOKEN, user="system:serviceaccount:default:gpu-reactor")
        admin, sa = sim.write_kubeconfig(tmp_path / "admin"), sim.write_kubeconfig(tmp_path / "sa", token=TOKEN)

        def kubectl(config: str, *args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(KUBECTL), "--kubeconfig", config, *args], capture_output=True, text=True, timeout=30)
        done = kubectl(admin, "apply", "-k", str(ROOT / "deploy" / "base"), "--validate=false")
        assert done.returncode == 0 and "resourcequota/gpu-quota created" in done.stdout, done.stderr
        done = kubectl(sa, "get", "pods", "-n", "ml-workloads")
        assert done.returncode == 1
        assert ('Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:default:gpu-reactor" '
                'cannot list resource "pods" in API group "" in the namespace "ml-workloads"') in done.stderr
        assert kubectl(admin, "auth", "can-i", "delete", "nodes").stdout.strip() == "yes"
        assert kubectl(sa, "auth", "can-i", "get", "/healthz").stdout.strip() == "yes"
        assert kubectl(sa, "auth", "can-i", "list", "secrets", "-n", "ml-workloads").stdout.strip() == "no"


# Bodies kubectl 1.32 sent for `auth can-i patch deployments --subresource=scale -n ml-workloads` and
# `auth can-i get /healthz` (Content-Type application/vnd.kubernetes.protobuf).
CAN_I_SCALE = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a65637441636365737352657669657712"
    "530a100a0012001a0022002a0032003800420012350a330a0c6d6c2d776f726b6c6f616473120570617463681a046170707322002a0b6465"
    "706c6f796d656e747332057363616c653a001a08080012001a0020001a002200")
CAN_I_HEALTHZ = bytes.fromhex(
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a65637441636365737352657669657712"
    "2f0a100a0012001a0022002a003200380042001211120f0a082f6865616c74687a12036765741a08080012001a0020001a002200")


def test_a_protobuf_self_subject_access_review_is_read(rsim: SimCluster) -> None:
    """kubectl sends SelfSubjectAccessReview as Kubernetes protobuf (`k8s\\0` + runtime.Unknown); the answer is
    JSON, which kubectl accepts too."""
    rsim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-workloads"}})
    _grant(rsim, [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]}], ns="ml-workloads")
    for body, allowed in ((CAN_I_SCALE, True), (CAN_I_HEALTHZ, True), (CAN_I_SCALE.replace(b"patch", b"watch"), False)):
        request = urllib.request.Request(f"{rsim.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", data=body,
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/vnd.kubernetes.protobuf"})
        with urllib.request.urlopen(request) as r:
            review = json.loads(r.read())
        assert r.status == 201 and review["status"]["allowed"] is allowed, review
    assert review["spec"]["resourceAttributes"] == {"namespace": "ml-workloads", "verb": "watch", "group": "apps",
                                                    "version": "", "resource": "deployments", "subresource": "scale",
                                                    "name": ""}


def test_a_review_can_only_be_created(sim: SimCluster) -> None:
    """selfsubjectaccessreviews supports `create` only (discovery says so): a GET is 405 MethodNotAllowed."""
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{sim.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert info.value.code == 405 and json.loads(info.value.read())["reason"] == "MethodNotAllowed"
    with urllib.request.urlopen(f"{sim.url}/apis/authorization.k8s.io/v1") as r:
        entries = {e["name"]: e["verbs"] for e in json.loads(r.read())["resources"]}
    assert entries == {"selfsubjectaccessreviews": ["create"], "subjectaccessreviews": ["create"]}
