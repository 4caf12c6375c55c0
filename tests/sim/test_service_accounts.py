"""ServiceAccounts and their tokens, pinned to upstream: the serviceaccounts controller (pkg/controller/
serviceaccount) gives every namespace a `default` account; TokenRequest (pkg/registry/core/serviceaccount/
storage/token.go, ValidateTokenRequest) issues a token that authenticates as system:serviceaccount:NS:NAME with
the ServiceAccount groups, for as long as the account (same uid) and any bound Pod or Secret exist."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.helpers import status_of
from tests.support import Ticks

KUBECTL = shutil.which("kubectl")


Clock = Ticks[datetime]


@pytest.fixture
def clock() -> Clock:
    return Ticks(datetime(2026, 1, 1, 12, tzinfo=UTC))


@pytest.fixture
def rsim(clock: Clock) -> Iterator[SimCluster]:
    with SimCluster(rbac=True, clock=clock).start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.settle()
        yield cluster


def _api(sim: SimCluster, token: str | None) -> k8s.ApiClient:
    config = k8s.Configuration(host=sim.url)
    config.api_key = {"BearerToken": token or ""}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(config)


def _token(sim: SimCluster, name: str = "default", ns: str = "ml", **spec: Any) -> Any:
    with _api(sim, sim.admin_token) as c:
        return k8s.CoreV1Api(c).create_namespaced_service_account_token(
            name, ns, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})


def _status(sim: SimCluster, token: str, path: str = "/api/v1/namespaces/ml/pods") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(sim.url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_every_namespace_gets_a_default_service_account(rsim: SimCluster) -> None:
    """The serviceaccounts controller creates `default` in each namespace, and again if it is deleted."""
    names = {(sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in rsim.list("serviceaccounts")}
    assert {("default", "default"), ("kube-system", "default"), ("ml", "default")} <= names
    rsim.delete("serviceaccounts", "ml", "default")
    rsim.settle()
    assert rsim.get("serviceaccounts", "ml", "default")["metadata"]["name"] == "default"


def test_a_token_request_authenticates_as_the_service_account(rsim: SimCluster) -> None:
    """TokenRequest: 201 with status.token; requests with it are the ServiceAccount's user (the 403 names it)."""
    issued = _token(rsim)
    assert issued.kind == "TokenRequest" and issued.spec.audiences == ["https://kubernetes.default.svc.cluster.local"]
    code, body = _status(rsim, issued.status.token)
    assert code == 403
    assert 'User "system:serviceaccount:ml:default" cannot list resource "pods"' in body["message"]


def test_the_token_carries_the_service_account_groups(rsim: SimCluster) -> None:
    """The user is in system:serviceaccounts and system:serviceaccounts:NS: a binding to that group grants."""
    rsim.apply([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                 "metadata": {"name": "pods", "namespace": "ml"},
                 "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                 "metadata": {"name": "pods", "namespace": "ml"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
                 "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ml"}]}])
    assert _status(rsim, _token(rsim).status.token)[0] == 200


def test_expiration_defaults_to_an_hour_and_is_enforced(rsim: SimCluster, clock: Clock) -> None:
    """SetDefaults_TokenRequestSpec: 3600 s; the token stops authenticating once expirationTimestamp passes."""
    issued = _token(rsim)
    assert issued.spec.expiration_seconds == 3600
    assert issued.status.expiration_timestamp == clock.now + timedelta(hours=1)
    clock.now += timedelta(minutes=59)
    assert _status(rsim, issued.status.token)[0] == 403
    clock.now += timedelta(minutes=1)
    assert _status(rsim, issued.status.token)[0] == 401


@pytest.mark.parametrize(("seconds", "detail"),
                         [(60, "may not specify a duration less than 10 minutes"),
                          ((1 << 32) + 1, "may not specify a duration larger than 2^32 seconds")],
                         ids=["too-short", "too-long"])
def test_an_out_of_range_expiration_is_422(rsim: SimCluster, seconds: int, detail: str) -> None:
    """ValidateTokenRequest."""
    status = status_of(lambda: _token(rsim, expirationSeconds=seconds), 422)
    assert status["message"] == (f'TokenRequest.authentication.k8s.io "default" is invalid: spec.expirationSeconds: '
                                 f"Invalid value: {seconds}: {detail}")


def test_a_token_for_another_audience_does_not_authenticate_here(rsim: SimCluster) -> None:
    """The API server accepts only tokens whose audiences include its own (--api-audiences)."""
    assert _status(rsim, _token(rsim, audiences=["vault"]).status.token)[0] == 401


def test_a_token_dies_with_its_service_account_even_if_recreated(rsim: SimCluster) -> None:
    """Tokens name the account's uid: a new account of the same name does not inherit them."""
    token = _token(rsim).status.token
    rsim.delete("serviceaccounts", "ml", "default")
    rsim.settle()
    assert _status(rsim, token)[0] == 401


def test_a_token_bound_to_a_pod_lives_as_long_as_the_pod(rsim: SimCluster) -> None:
    """boundObjectRef (Pod or Secret): the object must exist (404) with the given uid (409); the token stops
    authenticating when it is deleted; other kinds are a 400."""
    rsim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
    uid = rsim.get("pods", "ml", "p")["metadata"]["uid"]
    token = _token(rsim, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": uid}).status.token
    assert _status(rsim, token)[0] == 403
    status_of(lambda: _token(rsim, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "x"}), 409)
    assert status_of(lambda: _token(rsim, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "q"}),
                     404)["message"] == 'pods "q" not found'
    bad = status_of(lambda: _token(rsim, boundObjectRef={"kind": "Deployment", "apiVersion": "apps/v1", "name": "p"}),
                    400)
    assert bad["message"] == 'cannot bind token for serviceaccount "default" to object of type apps/v1, Kind=Deployment'
    rsim.delete("pods", "ml", "p")
    assert _status(rsim, token)[0] == 401


def test_a_token_for_a_missing_account_is_404(rsim: SimCluster) -> None:
    assert status_of(lambda: _token(rsim, "nobody"), 404)["message"] == 'serviceaccounts "nobody" not found'


def test_requesting_a_token_needs_create_on_serviceaccounts_token(rsim: SimCluster) -> None:
    """RBAC sees the subresource: a user that may not create serviceaccounts/token gets a 403 naming it."""
    token = _token(rsim).status.token
    with _api(rsim, token) as c:
        status = status_of(lambda: k8s.CoreV1Api(c).create_namespaced_service_account_token(
            "default", "ml", {"spec": {}}), 403)
    assert ('User "system:serviceaccount:ml:default" cannot create resource "serviceaccounts/token" in API group "" '
            'in the namespace "ml"') in status["message"]


def test_discovery_lists_the_token_subresource_and_the_reviews(rsim: SimCluster) -> None:
    """/api/v1 lists serviceaccounts/token as authentication.k8s.io/v1 TokenRequest (create only)."""
    code, core = _status(rsim, rsim.admin_token or "", "/api/v1")
    (entry,) = [r for r in core["resources"] if r["name"] == "serviceaccounts/token"]
    assert code == 200 and (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == (
        "authentication.k8s.io", "v1", "TokenRequest", ["create"])
    code, authz = _status(rsim, rsim.admin_token or "", "/apis/authorization.k8s.io/v1")
    assert {r["name"] for r in authz["resources"]} == {"selfsubjectaccessreviews", "subjectaccessreviews"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_create_token(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`kubectl create token` sends a protobuf TokenRequest (audiences, --duration as expirationSeconds); the token
    it prints works as a kubeconfig's user."""
    with SimCluster(rbac=True).start(tls=True) as sim:
        sim.settle()
        admin = sim.write_kubeconfig(tmp_path / "admin")
        done = subprocess.run([str(KUBECTL), "--kubeconfig", admin, "create", "token", "default", "-n", "default",
                               "--duration=20m"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        user = sim.write_kubeconfig(tmp_path / "sa", token=done.stdout.strip())
        done = subprocess.run([str(KUBECTL), "--kubeconfig", user, "get", "pods"], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 1
        assert 'User "system:serviceaccount:default:default" cannot list resource "pods"' in done.stderr
