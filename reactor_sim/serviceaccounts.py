"""ServiceAccounts: the controller-manager's `default` account in every namespace, and TokenRequest
(`POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`, authentication.k8s.io/v1), as pkg/registry/core/
serviceaccount/storage/token.go answers it.

A token is an opaque random string (not a signed JWT): it authenticates as system:serviceaccount:NS:NAME
while the account (same uid) and any bound Pod or Secret exist, until it expires, and only when it is meant
for the API server (its audiences). This module issues tokens; authn checks them on each request.
"""

from __future__ import annotations

import secrets
from datetime import UTC, timedelta
from typing import Any

from reactor_sim import objects
from reactor_sim.authn import Binding, Tokens, make_user
from reactor_sim.operations import Api
from reactor_sim.registry import Resource
from reactor_sim.status import ApiError, FieldError, bad_request, invalid

Obj = dict[str, Any]
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
DEFAULT_SECONDS = 3600  # SetDefaults_TokenRequestSpec
MIN_SECONDS, MAX_SECONDS = 600, 1 << 32
TOKEN_REQUEST = Resource("authentication.k8s.io", "v1", "TokenRequest", "token", True)
_BINDABLE = {"Pod": "pods", "Secret": "secrets"}


def ensure_default_accounts(api: Api) -> None:
    """The serviceaccounts controller: every namespace has a `default` ServiceAccount (recreated if deleted)."""
    res = api.registry.by_plural("serviceaccounts")
    for ns in api.store.items("namespaces"):
        name = ns["metadata"]["name"]
        if ns.get("status", {}).get("phase") != "Terminating" and not api.store.exists(res.plural, name, "default"):
            api.create(res, name, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})


def request_token(api: Api, tokens: Tokens | None, namespace: str, name: str, body: Any) -> Obj:
    """The TokenRequest answer (201): the spec as defaulted, and status.token / status.expirationTimestamp."""
    account = api.get(api.registry.by_plural("serviceaccounts"), namespace, name)
    if not isinstance(body, dict):
        raise bad_request("the body of the request was not a JSON object")
    spec = dict(body.get("spec") or {})
    spec["audiences"] = list(spec.get("audiences") or [API_AUDIENCE])
    spec["expirationSeconds"] = _seconds(spec.get("expirationSeconds"), name)
    bound = _bound(api, namespace, name, spec.get("boundObjectRef"))
    now = api.clock().astimezone(UTC)
    expires = now + timedelta(seconds=spec["expirationSeconds"])
    token = secrets.token_urlsafe(48)
    if tokens is not None and API_AUDIENCE in spec["audiences"]:
        user = make_user(f"system:serviceaccount:{namespace}:{name}")
        tokens.add(token, user, Binding(account["metadata"]["uid"], expires, bound))
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": objects.timestamp(api.clock)},
            "spec": {**spec, "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def _seconds(raw: Any, name: str) -> int:
    """ValidateTokenRequest: at least 10 minutes, at most 2^32 seconds (default one hour)."""
    seconds = DEFAULT_SECONDS if raw in (None, 0) else raw
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise bad_request(f"TokenRequest spec.expirationSeconds must be an integer, not {raw!r}")
    detail = ("may not specify a duration less than 10 minutes" if seconds < MIN_SECONDS else
              "may not specify a duration larger than 2^32 seconds" if seconds > MAX_SECONDS else "")
    if detail:
        raise invalid(TOKEN_REQUEST, name, [FieldError("spec.expirationSeconds", "Invalid value", detail, seconds)])
    return seconds


def _bound(api: Api, namespace: str, name: str, ref: Any) -> tuple[str, str, str, str] | None:
    """The Pod or Secret the token lives with: it must exist (404) and match a given uid (409)."""
    if not ref:
        return None
    kind, api_version = ref.get("kind", ""), ref.get("apiVersion") or "v1"
    plural = _BINDABLE.get(kind) if api_version == "v1" else None
    if plural is None:
        group, _, version = api_version.rpartition("/")
        raise bad_request(f'cannot bind token for serviceaccount "{name}" to object of type {group}/{version}, '
                          f"Kind={kind}")
    obj = api.get(api.registry.by_plural(plural), namespace, ref.get("name", ""))
    uid = obj["metadata"]["uid"]
    if ref.get("uid") and ref["uid"] != uid:
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind} "{ref.get("name")}": the UID in the '
                       f"bound object reference ({ref['uid']}) does not match the UID in record. The object might have "
                       "been deleted and then recreated", {"name": ref.get("name", ""), "kind": kind})
    return plural, namespace, obj["metadata"]["name"], uid
