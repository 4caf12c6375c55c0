"""Just enough of Kubernetes' protobuf encoding to read the one body kubectl insists on sending that way:
a SelfSubjectAccessReview (`kubectl auth can-i`). Answers stay JSON, which kubectl also accepts.

The envelope is `k8s\\0` + runtime.Unknown{typeMeta=1, raw=2}; field numbers are those of
k8s.io/api/authorization/v1/generated.proto. Everything else of the wire format is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_RESOURCE_ATTRIBUTES = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) for each field; length-delimited values are bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("truncated field")
            yield number, data[at:at + size]
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _message(data: bytes, number: int) -> bytes:
    return next((v for n, v in _fields(data) if n == number and isinstance(v, bytes)), b"")


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, v in _fields(data) if n in names and isinstance(v, bytes)}


def decode_self_subject_access_review(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf SelfSubjectAccessReview (its spec; metadata and status are ignored)."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    spec_bytes = _message(_message(body[len(MAGIC):], 2), 2)
    spec: dict[str, Any] = {}
    if resource := _message(spec_bytes, 1):
        spec["resourceAttributes"] = _strings(resource, _RESOURCE_ATTRIBUTES)
    if non_resource := _message(spec_bytes, 2):
        spec["nonResourceAttributes"] = _strings(non_resource, _NON_RESOURCE_ATTRIBUTES)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
