"""The protobuf bodies kubectl sends to the authentication and authorization endpoints beside
SelfSubjectAccessReview: a TokenRequest (`kubectl create token`) and a SubjectAccessReview.

Field numbers are those of k8s.io/api/authentication/v1 and authorization/v1 generated.proto (checked against
the bodies kubectl 1.32 sends); the wire format is read by `protobuf`. Decoding only: answers stay JSON.
"""

from __future__ import annotations

from typing import Any

from .protobuf import MAGIC, _fields, _message, _strings, decode_self_subject_access_review

_BOUND_OBJECT = {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}


def _unknown_raw(body: bytes) -> bytes:
    """The object inside the `k8s\\0` + runtime.Unknown envelope."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    return _message(body[len(MAGIC):], 2)


def decode_token_request(body: bytes) -> dict[str, Any]:
    """TokenRequest{spec=2: TokenRequestSpec{audiences=1 (repeated), boundObjectRef=3, expirationSeconds=4}}."""
    spec_bytes = _message(_unknown_raw(body), 2)
    spec: dict[str, Any] = {"audiences": []}
    for number, value in _fields(spec_bytes):
        if number == 1 and isinstance(value, bytes):
            spec["audiences"].append(value.decode())
        elif number == 3 and isinstance(value, bytes):
            spec["boundObjectRef"] = _strings(value, _BOUND_OBJECT)
        elif number == 4 and isinstance(value, int):
            spec["expirationSeconds"] = value
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def decode_subject_access_review(body: bytes) -> dict[str, Any]:
    """SubjectAccessReviewSpec: the attributes of SelfSubjectAccessReviewSpec (1, 2), user=3, groups=4
    (repeated); extra and uid are not read (RBAC does not look at them)."""
    review = decode_self_subject_access_review(body)
    spec_bytes = _message(_unknown_raw(body), 2)
    spec = review["spec"]
    for number, value in _fields(spec_bytes):
        if number == 3 and isinstance(value, bytes):
            spec["user"] = value.decode()
        elif number == 4 and isinstance(value, bytes):
            spec.setdefault("groups", []).append(value.decode())
    return {**review, "kind": "SubjectAccessReview"}
