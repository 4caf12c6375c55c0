"""kube-apiserver accepts `application/vnd.kubernetes.protobuf` bodies: kubectl sends its creates of
ServiceAccounts, (Cluster)RoleBindings, Roles, Namespaces and TokenRequests that way. The captured bodies
below are what kubectl v1.32.4 sent; the built ones follow the wire format of generated.proto."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from reactor_sim.protobuf_objects import decode, transcode

PROTOBUF = "application/vnd.kubernetes.protobuf"
KUBECTL = shutil.which("kubectl")
# `kubectl create serviceaccount robot -n default`
SERVICE_ACCOUNT = bytes.fromhex(
    "6b3873000a140a027631120e536572766963654163636f756e74121e0a1c0a05726f626f7412001a0764656661756c7422002a0032"
    "00380042001a002200")
# `kubectl create rolebinding rb --clusterrole=view --serviceaccount=default:robot --user=alice --group=team`
ROLE_BINDING = bytes.fromhex(
    "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b526f6c6542696e64696e6712c701"
    "0a190a02726212001a0764656661756c7422002a00320038004200122a0a04557365721219726261632e617574686f72697a6174"
    "696f6e2e6b38732e696f1a05616c6963652200122a0a0547726f75701219726261632e617574686f72697a6174696f6e2e6b3873"
    "2e696f1a047465616d220012220a0e536572766963654163636f756e7412001a05726f626f74220764656661756c741a2e0a1972"
    "6261632e617574686f72697a6174696f6e2e6b38732e696f120b436c7573746572526f6c651a04766965771a002200")
# `kubectl create token robot --duration=1h --audience=https://kubernetes.default.svc`
TOKEN_REQUEST = bytes.fromhex(
    "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e52657175657374123d0a100a00"
    "12001a0022002a0032003800420012230a1e68747470733a2f2f6b756265726e657465732e64656661756c742e73766320901c1a"
    "040a0012001a002200")
RBAC_GROUP = "rbac.authorization.k8s.io"


def test_kubectl_service_account_body_decodes_to_its_json_form() -> None:
    """runtime.Unknown{typeMeta{apiVersion, kind}, raw=ServiceAccount{metadata=ObjectMeta}}: empty fields,
    which gogo-protobuf writes out, are dropped as the JSON form drops them."""
    assert decode(SERVICE_ACCOUNT) == {"apiVersion": "v1", "kind": "ServiceAccount",
                                       "metadata": {"name": "robot", "namespace": "default"}}


def test_kubectl_role_binding_body_decodes_subjects_and_role_ref() -> None:
    """rbac/v1 RoleBinding{metadata=1, subjects=2 (Subject kind=1 apiGroup=2 name=3 namespace=4), roleRef=3}."""
    assert decode(ROLE_BINDING) == {
        "apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "default"},
        "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": "alice"},
                     {"kind": "Group", "apiGroup": RBAC_GROUP, "name": "team"},
                     {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"}}


def test_kubectl_token_request_body_decodes_for_the_token_subresource() -> None:
    """authentication/v1 TokenRequest{spec{audiences=1, expirationSeconds=4}}: decoded, so protobuf does not
    stand between `kubectl create token` and the serviceaccounts/NAME/token endpoint."""
    body, content_type = transcode(TOKEN_REQUEST, PROTOBUF)
    assert content_type == "application/json"
    assert json.loads(body) == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}}


def _field(number: int, payload: bytes | int | str) -> bytes:
    """One protobuf field: varint (wire type 0) for ints, length-delimited (2) for bytes and strings."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, raw)


def test_object_meta_maps_owner_references_and_pointer_bools_decode() -> None:
    """ObjectMeta labels=11/annotations=12 (map entries key=1 value=2), ownerReferences=13 (apiVersion=5,
    kind=1, name=3, uid=4, controller=6), creationTimestamp=8 (Time seconds=1); ServiceAccount
    imagePullSecrets=3 and automountServiceAccountToken=4, kept when false (a *bool that was set)."""
    owner = _field(5, "apps/v1") + _field(1, "Deployment") + _field(3, "web") + _field(4, "u-1") + _field(6, 1)
    meta = (_field(1, "robot") + _field(11, _field(1, "app") + _field(2, "web")) + _field(11, _field(1, "tier"))
            + _field(12, _field(1, "note") + _field(2, "x")) + _field(13, owner)
            + _field(8, _field(1, 1_764_547_200)))
    raw = _field(1, meta) + _field(3, _field(1, "pull")) + _field(4, 0)
    assert decode(_envelope("v1", "ServiceAccount", raw)) == {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "robot", "labels": {"app": "web", "tier": ""}, "annotations": {"note": "x"},
                     "creationTimestamp": "2025-12-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1",
                                          "controller": True}]},
        "imagePullSecrets": [{"name": "pull"}], "automountServiceAccountToken": False}


@pytest.mark.parametrize(("body", "content_type"), [
    (b'{"kind": "ServiceAccount"}', "application/json"),
    (_envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", b""), PROTOBUF),
    (b"k8s\x00\x0a\xff", PROTOBUF),
], ids=["json", "other-kind", "truncated"])
def test_other_bodies_pass_through_unchanged(body: bytes, content_type: str) -> None:
    """JSON, kinds this module does not know, and malformed envelopes are left to the rest of the server."""
    assert transcode(body, content_type) == (body, content_type)


def _post(sim: SimCluster, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{sim.url}{path}", data=body, method="POST",
                                     headers={"Content-Type": PROTOBUF, "Accept": f"{PROTOBUF},application/json"})
    with urllib.request.urlopen(request) as answer:
        return answer.status, json.loads(answer.read())


def test_protobuf_creates_are_stored_like_json_ones() -> None:
    """POSTing kubectl's protobuf bodies: 201 Created, answered in JSON (kubectl accepts it), and stored."""
    with SimCluster().start() as sim:
        code, created = _post(sim, "/api/v1/namespaces/default/serviceaccounts", SERVICE_ACCOUNT)
        assert (code, created["metadata"]["name"]) == (201, "robot")
        code, _ = _post(sim, f"/apis/{RBAC_GROUP}/v1/namespaces/default/rolebindings", ROLE_BINDING)
        assert code == 201
        assert sim.get("rolebindings", "default", "rb")["roleRef"]["name"] == "view"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_create_serviceaccount_rolebinding_role_and_namespace(tmp_path: Path) -> None:
    """The real kubectl against the embedded cluster (RBAC on, TLS): its protobuf creates succeed."""
    assert KUBECTL is not None
    with SimCluster(rbac=True).start(tls=True) as sim:
        config = sim.write_kubeconfig(tmp_path / "admin")
        commands = [["create", "namespace", "team-a"],
                    ["create", "serviceaccount", "robot", "-n", "team-a"],
                    ["create", "role", "reader", "--verb=get,list", "--resource=pods", "-n", "team-a"],
                    ["create", "rolebinding", "rb", "--role=reader", "--serviceaccount=team-a:robot", "-n", "team-a"],
                    ["create", "clusterrolebinding", "crb", "--clusterrole=view", "--serviceaccount=team-a:robot"]]
        for args in commands:
            done = subprocess.run([KUBECTL, "--kubeconfig", config, *args], capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, (args, done.stderr)
        assert sim.get("roles", "team-a", "reader")["rules"] == [{"verbs": ["get", "list"], "apiGroups": [""],
                                                                  "resources": ["pods"]}]
        assert sim.get("rolebindings", "team-a", "rb")["subjects"] == [
            {"kind": "ServiceAccount", "name": "robot", "namespace": "team-a"}]
        assert sim.get("clusterrolebindings", None, "crb")["roleRef"]["name"] == "view"
