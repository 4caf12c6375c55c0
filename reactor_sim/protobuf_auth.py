"""The protobuf SubjectAccessReview body (what Go clients send), beside `protobuf`'s SelfSubjectAccessReview;
a TokenRequest (`kubectl create token`) arrives as JSON already (`protobuf_objects`).

Field numbers are those of k8s.io/api/authorization/v1 generated.proto; the wire format is read by
`protobuf`. Decoding only: answers stay JSON.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.protobuf import MAGIC, _fields, _message, decode_self_subject_access_review


def _unknown_raw(body: bytes) -> bytes:
    """The object inside the `k8s\\0` + runtime.Unknown envelope."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    return _message(body[len(MAGIC):], 2)


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
