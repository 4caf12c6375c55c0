"""Impersonation and access reviews, pinned to k8s.io/apiserver's impersonation filter (legacy WithImpersonation:
the `impersonate` verb on users, groups, serviceaccounts, uids and userextras; a ServiceAccount without requested
groups gets its fixed groups; system:authenticated is added) and to the SelfSubjectAccessReview and
SubjectAccessReview REST storage (answers by the authorizer; ValidateSubjectAccessReviewSpec)."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import pytest

from reactor_sim import SimCluster

SA = "system:serviceaccount:ml:reactor"
SA_TOKEN = "sa-token"
KUBECTL = shutil.which("kubectl")
RBAC = "rbac.authorization.k8s.io/v1"


def _grant(sim: SimCluster, name: str, rules: list[dict[str, Any]], subject: dict[str, Any]) -> None:
    sim.apply([{"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules},
               {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name}, "subjects": [subject],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}])


@pytest.fixture
def rsim() -> Iterator[SimCluster]:
    with SimCluster(rbac=True).start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "reactor", "namespace": "ml"}})
        cluster.add_token(SA_TOKEN, user=SA)
        _grant(cluster, "deploy-reader", [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}],
               {"kind": "ServiceAccount", "name": "reactor", "namespace": "ml"})
        yield cluster


def _post(sim: SimCluster, path: str, body: dict[str, Any], token: str | None,
          headers: Sequence[tuple[str, str]] = ()) -> tuple[int, dict[str, Any]]:
    """POST JSON with headers that may repeat (Impersonate-Group), which urllib cannot send."""
    url = urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    data = json.dumps(body).encode()
    try:
        conn.putrequest("POST", path)
        for key, value in [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json"),
                           ("Content-Length", str(len(data))), *headers]:
            conn.putheader(key, value)
        conn.endheaders(data)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def _can_i(sim: SimCluster, token: str | None, attrs: dict[str, str],
           headers: Sequence[tuple[str, str]] = ()) -> tuple[int, dict[str, Any]]:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}
    return _post(sim, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body, token, list(headers))


LIST_DEPLOY = {"namespace": "ml", "verb": "list", "group": "apps", "resource": "deployments"}
LIST_SECRETS = {"namespace": "ml", "verb": "list", "resource": "secrets"}


def test_a_self_review_under_impersonation_answers_for_the_impersonated_user(rsim: SimCluster) -> None:
    """`kubectl auth can-i --as=system:serviceaccount:ml:reactor`: the admin may impersonate, and the review
    then answers by the ServiceAccount's bindings, not the admin's."""
    as_sa = [("Impersonate-User", SA)]
    assert _can_i(rsim, rsim.admin_token, LIST_SECRETS)[1]["status"]["allowed"] is True
    code, review = _can_i(rsim, rsim.admin_token, LIST_SECRETS, as_sa)
    assert (code, review["status"]["allowed"]) == (201, False)
    code, review = _can_i(rsim, rsim.admin_token, LIST_DEPLOY, as_sa)
    assert (code, review["status"]["allowed"]) == (201, True)
    assert review["status"]["reason"].startswith('RBAC: allowed by ClusterRoleBinding "deploy-reader"')


def test_impersonating_needs_the_impersonate_verb(rsim: SimCluster) -> None:
    """A user without `impersonate` on users gets 403 from the impersonation filter, naming the resource."""
    code, status = _can_i(rsim, SA_TOKEN, LIST_DEPLOY, [("Impersonate-User", "bob")])
    assert code == 403 and status["reason"] == "Forbidden"
    assert status["message"] == ('users "bob" is forbidden: User "system:serviceaccount:ml:reactor" cannot impersonate '
                                 'resource "users" in API group "" at the cluster scope')
    _grant(rsim, "impersonate-bob", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                                      "resourceNames": ["bob"]}], {"kind": "ServiceAccount", "name": "reactor",
                                                                   "namespace": "ml"})
    code, review = _can_i(rsim, SA_TOKEN, LIST_DEPLOY, [("Impersonate-User", "bob")])
    assert (code, review["status"]["allowed"]) == (201, False)  # bob has no binding
    code, status = _can_i(rsim, SA_TOKEN, LIST_DEPLOY, [("Impersonate-User", "alice")])
    assert code == 403


def test_each_impersonated_group_needs_its_own_grant(rsim: SimCluster) -> None:
    """Groups are checked one by one (`groups` resource); a ServiceAccount is checked in its namespace."""
    _grant(rsim, "impersonate-bob", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}],
           {"kind": "ServiceAccount", "name": "reactor", "namespace": "ml"})
    code, status = _can_i(rsim, SA_TOKEN, LIST_DEPLOY, [("Impersonate-User", "bob"),
                                                        ("Impersonate-Group", "system:masters")])
    assert code == 403 and status["message"].startswith('groups "system:masters" is forbidden: User "'
                                                        'system:serviceaccount:ml:reactor" cannot impersonate resource '
                                                        '"groups" in API group "" at the cluster scope')
    code, status = _can_i(rsim, SA_TOKEN, LIST_DEPLOY, [("Impersonate-User", "system:serviceaccount:ml:default")])
    assert code == 403 and 'cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ml"' \
        in status["message"]


def test_impersonated_groups_replace_the_service_account_groups(rsim: SimCluster) -> None:
    """Without Impersonate-Group a ServiceAccount gets system:serviceaccounts(:NS) and system:authenticated;
    with groups, those are the authority (plus system:authenticated)."""
    _grant(rsim, "ml-sa-reader", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
           {"kind": "Group", "name": "system:serviceaccounts:ml"})
    as_default = [("Impersonate-User", "system:serviceaccount:ml:default")]
    assert _can_i(rsim, rsim.admin_token, LIST_SECRETS, as_default)[1]["status"]["allowed"] is True
    with_group = [*as_default, ("Impersonate-Group", "team-a")]
    assert _can_i(rsim, rsim.admin_token, LIST_SECRETS, with_group)[1]["status"]["allowed"] is False
    both = [*with_group, ("Impersonate-Group", "system:serviceaccounts:ml")]
    assert _can_i(rsim, rsim.admin_token, LIST_SECRETS, both)[1]["status"]["allowed"] is True


def test_groups_without_a_user_are_an_internal_error(rsim: SimCluster) -> None:
    """buildImpersonationRequests: `requested [...] without impersonating a user`, answered as InternalError."""
    code, status = _can_i(rsim, rsim.admin_token, LIST_DEPLOY, [("Impersonate-Group", "team-a")])
    assert code == 500 and status["reason"] == "InternalError"
    assert status["message"].endswith("without impersonating a user")


def _sar(sim: SimCluster, token: str | None, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    return _post(sim, "/apis/authorization.k8s.io/v1/subjectaccessreviews", body, token)


def test_a_subject_access_review_answers_for_the_named_subject(rsim: SimCluster) -> None:
    """SubjectAccessReview: the spec's user and groups exactly as given (no group is added)."""
    code, review = _sar(rsim, rsim.admin_token, {"user": SA, "resourceAttributes": LIST_DEPLOY})
    assert (code, review["kind"], review["status"]["allowed"]) == (201, "SubjectAccessReview", True)
    secrets = _sar(rsim, rsim.admin_token, {"user": SA, "resourceAttributes": LIST_SECRETS})
    assert secrets[1]["status"]["allowed"] is False
    discovery = {"nonResourceAttributes": {"path": "/api", "verb": "get"}}
    assert _sar(rsim, rsim.admin_token, {"user": "x", **discovery})[1]["status"]["allowed"] is False
    assert _sar(rsim, rsim.admin_token, {"user": "x", "groups": ["system:authenticated"],
                                         **discovery})[1]["status"]["allowed"] is True


def test_a_subject_access_review_needs_a_subject_and_a_grant(rsim: SimCluster) -> None:
    """ValidateSubjectAccessReviewSpec: user or group (422); creating one needs RBAC `create` (the admin's)."""
    code, status = _sar(rsim, rsim.admin_token, {"resourceAttributes": LIST_DEPLOY})
    assert code == 422 and status["message"] == ('SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: '
                                                 'Invalid value: "": at least one of user or group must be specified')
    code, status = _sar(rsim, SA_TOKEN, {"user": SA, "resourceAttributes": LIST_DEPLOY})
    assert code == 403 and 'cannot create resource "subjectaccessreviews"' in status["message"]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_auth_can_i_as_a_service_account_is_truthful(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`kubectl auth can-i --as=system:serviceaccount:NS:SA`: a protobuf SelfSubjectAccessReview with
    Impersonate-User, answered by that ServiceAccount's RBAC rules."""
    with SimCluster(rbac=True).start(tls=True) as sim:
        sim.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "reactor", "namespace": "default"}})
        _grant(sim, "deploy-patcher", [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}],
               {"kind": "ServiceAccount", "name": "reactor", "namespace": "default"})
        admin = sim.write_kubeconfig(tmp_path / "admin")

        def can_i(*args: str) -> str:
            done = subprocess.run([str(KUBECTL), "--kubeconfig", admin, "auth", "can-i", *args,
                                   "--as=system:serviceaccount:default:reactor"], capture_output=True, text=True,
                                  timeout=30)
            return done.stdout.strip()
        assert can_i("patch", "deployments") == "yes"
        assert can_i("delete", "deployments") == "no"
        assert can_i("list", "secrets") == "no"


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (lengths below 128 here)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_a_protobuf_subject_access_review_is_read(rsim: SimCluster) -> None:
    """A Go client's SubjectAccessReview in Kubernetes protobuf (`k8s\\0` + runtime.Unknown; SubjectAccessReviewSpec
    resourceAttributes=1, user=3, groups=4): answered like the JSON form."""
    attrs = b"".join(_field(n, v) for n, v in ((1, b"ml"), (2, b"list"), (3, b"apps"), (5, b"deployments")))
    spec = _field(1, attrs) + _field(3, SA.encode()) + _field(4, b"team-a")
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SubjectAccessReview")
    body = b"k8s\x00" + _field(1, type_meta) + _field(2, _field(2, spec))
    url = urlsplit(rsim.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    try:
        conn.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body,
                     headers={"Authorization": f"Bearer {rsim.admin_token}",
                              "Content-Type": "application/vnd.kubernetes.protobuf"})
        r = conn.getresponse()
        review = json.loads(r.read())
    finally:
        conn.close()
    assert r.status == 201 and review["status"]["allowed"] is True
    assert (review["spec"]["user"], review["spec"]["groups"]) == (SA, ["team-a"])
