"""Content negotiation of the object form: `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`.

Upstream: k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go (`NegotiateOutputMediaType`,
`acceptMediaTypeOptions`: the `as`, `g` and `v` parameters name the form to convert to; a clause whose form the
endpoint does not allow is passed over, and when none is left the answer is 406 NotAcceptable),
handlers/rest.go `AllowsMediaTypeTransform` (PartialObjectMetadata and PartialObjectMetadataList of meta.k8s.io
v1 or v1beta1, and Table — built in tables.py, offered for every resource, not a subresource), and
handlers/response.go (`asPartialObjectMetadata`,
`asPartialObjectMetadataList`: each item keeps its whole `metadata` and gets kind PartialObjectMetadata; the list
keeps resourceVersion and continue; asking for one form of the other shape is a 406). A watch converts each event's
object (handlers/watch.go `newWatchEmbeddedEncoder`). This is what client-go's metadata client and the garbage
collector send. Only JSON is served, so a clause of another media type is passed over as the server would pass
over one it cannot serve.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.status import ApiError

Obj = dict[str, Any]
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
TABLE = "Table"
GROUP_VERSIONS = ("meta.k8s.io/v1", "meta.k8s.io/v1beta1")
_JSON = ("application/json", "application/*", "*/*")
ACCEPTED = "only the following media types are accepted: application/json, application/yaml, " \
           "application/vnd.kubernetes.protobuf"


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def target(accept: str | None, *, table: bool = False) -> tuple[str, str] | None:
    """(kind, apiVersion) of the form the Accept header asks for; None for the object as stored.

    `table`: whether a Table may be answered (a subresource has none here: a Table clause is passed over, as
    kubectl expects when it offers plain JSON after it). Raises 406 when every clause asks for a form this server
    cannot give (an unknown `as`, another group)."""
    if not accept or not accept.strip():
        return None
    refused = False
    for clause in accept.split(","):
        parts = [p.strip() for p in clause.split(";")]
        media, params = parts[0].lower(), dict(_param(p) for p in parts[1:] if "=" in p)
        if media not in _JSON or params.get("q") in ("0", "0.0"):
            refused = refused or media in _JSON
            continue
        kind = params.get("as")
        if kind is None:
            return None
        api_version = f"{params.get('g', '')}/{params.get('v', '')}"
        if (kind in (PARTIAL, PARTIAL_LIST) or (kind == TABLE and table)) and api_version in GROUP_VERSIONS:
            return kind, api_version
        refused = True
    if refused:
        raise not_acceptable(ACCEPTED)
    return None


def _param(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.strip().lower(), value.strip().strip('"')


def convert(answer: Obj, form: tuple[str, str], *, is_list: bool) -> Obj:
    """`answer` (an object or a list of them) in the form asked for; 406 for the other shape."""
    kind, api_version = form
    if kind == PARTIAL and is_list:
        raise not_acceptable(f"you requested {PARTIAL}, but the requested object is a list "
                             f"(*v1.{answer.get('kind', 'List')})")
    if kind == PARTIAL_LIST and not is_list:
        raise not_acceptable(f"you requested {PARTIAL_LIST}, but the requested object is not a list "
                             f"(*v1.{answer.get('kind', 'Object')})")
    if kind == PARTIAL:
        return partial(answer, api_version)
    meta = {k: v for k, v in (answer.get("metadata") or {}).items() if k in ("resourceVersion", "continue")}
    return {"kind": PARTIAL_LIST, "apiVersion": api_version, "metadata": meta,
            "items": [partial(item, api_version) for item in answer.get("items") or []]}


def partial(obj: Obj, api_version: str = GROUP_VERSIONS[0]) -> Obj:
    """meta.AsPartialObjectMetadata: the object's whole metadata under kind PartialObjectMetadata."""
    return {"kind": PARTIAL, "apiVersion": api_version, "metadata": obj.get("metadata") or {}}


def event(evt: Obj, form: tuple[str, str]) -> Obj:
    """A watch event whose object is converted (an ERROR event's Status is sent as it is)."""
    if evt.get("type") == "ERROR" or not isinstance(evt.get("object"), dict):
        return evt
    return {**evt, "object": partial(evt["object"], form[1])}
