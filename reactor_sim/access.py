"""The authentication and authorization API endpoints the simulated server answers itself: TokenRequest
(serviceaccounts/token), SelfSubjectAccessReview and SubjectAccessReview, from a JSON or protobuf body.

Routing and decoding only: the answers come from `serviceaccounts` and `rbac`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from reactor_sim import protobuf, protobuf_auth, rbac, serviceaccounts
from reactor_sim.authn import Tokens, User
from reactor_sim.operations import Api
from reactor_sim.routing import Route
from reactor_sim.status import bad_request

Obj = dict[str, Any]
REVIEWS = ("selfsubjectaccessreviews", "subjectaccessreviews")


def handles(route: Route) -> bool:
    return route.resource.plural in REVIEWS or (route.resource.plural == "serviceaccounts"
                                                and route.subresource == "token")


def answer(api: Api, tokens: Tokens | None, route: Route, user: User | None, body: bytes,
           content_type: str) -> tuple[int, Obj]:
    """(201, the answer) for a create on one of these endpoints; ApiError otherwise. Callers hold the lock."""
    plural = route.resource.plural
    if plural == "selfsubjectaccessreviews":
        return 201, rbac.self_review(api.store, user, _decode(body, content_type,
                                                              protobuf.decode_self_subject_access_review))
    if plural == "subjectaccessreviews":
        sent = _decode(body, content_type, protobuf_auth.decode_subject_access_review)
        return 201, rbac.subject_review(api.store, tokens is not None, sent)
    assert route.namespace is not None and route.name is not None
    sent = _decode(body, content_type, _not_transcoded)
    return 201, serviceaccounts.request_token(api, tokens, route.namespace, route.name, sent)


def _not_transcoded(body: bytes) -> Obj:
    raise ValueError("not a TokenRequest (protobuf_objects decodes those)")


def _decode(body: bytes, content_type: str, from_protobuf: Callable[[bytes], Obj]) -> Any:
    if content_type.startswith(protobuf.CONTENT_TYPE):
        try:
            return from_protobuf(body)
        except ValueError as e:
            raise bad_request(f"unable to decode the protobuf body: {e}") from e
    try:
        return json.loads(body or b"null")
    except ValueError as e:
        raise bad_request(f"couldn't get version/kind; json parse error: {e}") from e
