"""The protobuf bodies kubectl sends for the objects it creates that way (`kubectl create serviceaccount`,
`create rolebinding`, `create clusterrolebinding`, `create role`, `create token`, `create namespace`),
turned into the JSON the rest of the server reads.

The envelope is `k8s\\0` + runtime.Unknown{typeMeta=1 (apiVersion=1, kind=2), raw=2}; the messages' field
numbers are those of generated.proto in k8s.io/apimachinery (meta/v1), k8s.io/api core/v1, rbac/v1 and
authentication/v1. Fields the JSON form leaves out when empty are left out here too. Pure: bytes in,
bytes out; a body of another kind (or not protobuf at all) is passed through unchanged.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from reactor_sim.protobuf import CONTENT_TYPE, MAGIC, _fields

Obj = dict[str, Any]
Schema = dict[int, tuple[str, Any, bool]]  # field number -> (JSON name, scalar kind or message schema, repeated)
STR, INT, BOOL, TIME, MAP = "string", "int64", "bool", "time", "map"
JSON = "application/json"

OWNER_REFERENCE: Schema = {5: ("apiVersion", STR, False), 1: ("kind", STR, False), 3: ("name", STR, False),
                           4: ("uid", STR, False), 6: ("controller", BOOL, False),
                           7: ("blockOwnerDeletion", BOOL, False)}
OBJECT_META: Schema = {
    1: ("name", STR, False), 2: ("generateName", STR, False), 3: ("namespace", STR, False),
    4: ("selfLink", STR, False), 5: ("uid", STR, False), 6: ("resourceVersion", STR, False),
    7: ("generation", INT, False), 8: ("creationTimestamp", TIME, False), 9: ("deletionTimestamp", TIME, False),
    10: ("deletionGracePeriodSeconds", INT, False), 11: ("labels", MAP, False), 12: ("annotations", MAP, False),
    13: ("ownerReferences", OWNER_REFERENCE, True), 14: ("finalizers", STR, True),
}
OBJECT_REFERENCE: Schema = {1: ("kind", STR, False), 2: ("namespace", STR, False), 3: ("name", STR, False),
                            4: ("uid", STR, False), 5: ("apiVersion", STR, False), 6: ("resourceVersion", STR, False),
                            7: ("fieldPath", STR, False)}
SERVICE_ACCOUNT: Schema = {1: ("metadata", OBJECT_META, False), 2: ("secrets", OBJECT_REFERENCE, True),
                           3: ("imagePullSecrets", {1: ("name", STR, False)}, True),
                           4: ("automountServiceAccountToken", BOOL, False)}
NAMESPACE: Schema = {1: ("metadata", OBJECT_META, False), 2: ("spec", {1: ("finalizers", STR, True)}, False)}
SUBJECT: Schema = {1: ("kind", STR, False), 2: ("apiGroup", STR, False), 3: ("name", STR, False),
                   4: ("namespace", STR, False)}
ROLE_REF: Schema = {1: ("apiGroup", STR, False), 2: ("kind", STR, False), 3: ("name", STR, False)}
BINDING: Schema = {1: ("metadata", OBJECT_META, False), 2: ("subjects", SUBJECT, True),
                   3: ("roleRef", ROLE_REF, False)}
POLICY_RULE: Schema = {1: ("verbs", STR, True), 2: ("apiGroups", STR, True), 3: ("resources", STR, True),
                       4: ("resourceNames", STR, True), 5: ("nonResourceURLs", STR, True)}
ROLE: Schema = {1: ("metadata", OBJECT_META, False), 2: ("rules", POLICY_RULE, True)}
BOUND_OBJECT_REFERENCE: Schema = {1: ("kind", STR, False), 2: ("apiVersion", STR, False), 3: ("name", STR, False),
                                  4: ("uid", STR, False)}
TOKEN_REQUEST: Schema = {
    1: ("metadata", OBJECT_META, False),
    2: ("spec", {1: ("audiences", STR, True), 4: ("expirationSeconds", INT, False),
                 3: ("boundObjectRef", BOUND_OBJECT_REFERENCE, False)}, False),
}
RBAC = "rbac.authorization.k8s.io/v1"
KINDS: dict[tuple[str, str], Schema] = {
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT, ("v1", "Namespace"): NAMESPACE,
    (RBAC, "RoleBinding"): BINDING, (RBAC, "ClusterRoleBinding"): BINDING,
    (RBAC, "Role"): ROLE, (RBAC, "ClusterRole"): ROLE,
    ("authentication.k8s.io/v1", "TokenRequest"): TOKEN_REQUEST,
}


def transcode(body: bytes, content_type: str) -> tuple[bytes, str]:
    """(JSON body, `application/json`) for a protobuf body of a kind in KINDS; anything else unchanged (a
    malformed envelope too: the JSON decoder then answers it with a 400)."""
    if not content_type.startswith(CONTENT_TYPE) or not body.startswith(MAGIC):
        return body, content_type
    try:
        obj = decode(body)
    except ValueError:
        return body, content_type
    return (json.dumps(obj).encode(), JSON) if obj is not None else (body, content_type)


def decode(body: bytes) -> Obj | None:
    """The JSON form of a protobuf object of a kind in KINDS (None for another kind); ValueError if malformed."""
    envelope = dict(_fields(body[len(MAGIC):]))
    type_meta = _message(envelope.get(1, b""), {1: ("apiVersion", STR, False), 2: ("kind", STR, False)})
    schema = KINDS.get((type_meta.get("apiVersion", ""), type_meta.get("kind", "")))
    if schema is None:
        return None
    raw = envelope.get(2, b"")
    if not isinstance(raw, bytes):
        raise ValueError("runtime.Unknown raw is not bytes")
    return {**type_meta, **_message(raw, schema)}


def _message(data: Any, schema: Schema) -> Obj:
    if not isinstance(data, bytes):
        raise ValueError("expected a length-delimited message")
    out: Obj = {}
    for number, value in _fields(data):
        if number not in schema:
            continue
        name, kind, repeated = schema[number]
        decoded = _value(value, kind)
        if kind == MAP:
            out.setdefault(name, {}).update(decoded)
        elif repeated:
            out.setdefault(name, []).append(decoded)
        elif decoded not in ("", {}, None) and not (kind == INT and decoded == 0 and name == "generation"):
            out[name] = decoded
    return out


def _value(value: bytes | int, kind: Any) -> Any:
    if isinstance(kind, dict):
        return _message(value, kind)
    if kind == STR:
        return _bytes(value).decode()
    if kind == INT:
        number = _int(value)
        return number - (1 << 64) if number >= 1 << 63 else number
    if kind == BOOL:
        return bool(_int(value))
    if kind == TIME:
        seconds = _message(value, {1: ("seconds", INT, False)}).get("seconds")
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
    entry = _message(value, {1: ("key", STR, False), 2: ("value", STR, False)})  # MAP: one map<string,string> entry
    return {entry.get("key", ""): entry.get("value", "")}


def _bytes(value: bytes | int) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("expected a length-delimited field")
    return value


def _int(value: bytes | int) -> int:
    if not isinstance(value, int):
        raise ValueError("expected a varint field")
    return value
