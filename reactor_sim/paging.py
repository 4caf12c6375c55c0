"""Lists in pages: `limit` and `continue`, as kube-apiserver serves a list read from etcd.

Upstream: k8s.io/apiserver/pkg/storage/etcd3/store.go `GetList` (items in key order, at most `limit`, and a
`continue` token when more are left, with `remainingItemCount` when no selector filters them) and
pkg/storage/continue.go `EncodeContinue` / `DecodeContinue` (base64 RawURLEncoding of
{"v":"meta.k8s.io/v1","rv":<the first page's resourceVersion>,"start":<the next key>}; a token that does not
decode is a 400 "invalid continue token"). Every page carries the first page's resourceVersion, so a watch from
it misses nothing. Unlike etcd, the pages after the first are read from the current state, not a snapshot at that
version: an object created or deleted between pages may appear or be missed, and the watch from the list's
version then delivers it (ADDED, DELETED) — what an informer needs, not a consistent snapshot.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from typing import Any

from reactor_sim.status import bad_request

Obj = dict[str, Any]
VERSION = "meta.k8s.io/v1"


def key(obj: Obj, across_namespaces: bool) -> str:
    """The object's etcd key below the list's prefix: `namespace/name` across namespaces, else `name`."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if across_namespaces else str(meta.get("name", ""))


def page(items: list[Obj], rv: str, query: dict[str, str], *, across_namespaces: bool,
         filtered: bool) -> tuple[list[Obj], Obj]:
    """(the page's items, the list's metadata) for `limit`/`continue` in `query`; all items without a limit."""
    raw_limit, token = query.get("limit", ""), query.get("continue", "")
    start = ""
    if token:
        start, token_rv = decode(token)
        rv = str(token_rv)
    try:
        limit = int(raw_limit) if raw_limit else 0
    except ValueError as e:
        raise bad_request(f"invalid limit: {raw_limit!r}") from e
    if limit <= 0 and not start:
        return items, {"resourceVersion": rv}
    keyed = [(key(o, across_namespaces).encode(), o) for o in items]
    if across_namespaces:  # `items` come in (namespace, name) order; within one namespace that is the byte order
        keyed.sort(key=lambda pair: pair[0])  # etcd's byte order of the keys ("a-b/x" before "a/x")
    first = bisect.bisect_left(keyed, start.encode(), key=lambda pair: pair[0]) if start else 0
    rest = [o for _, o in keyed[first:]]
    if limit <= 0 or len(rest) <= limit:
        return rest, {"resourceVersion": rv}
    chosen = rest[:limit]
    meta: Obj = {"resourceVersion": rv, "continue": encode(key(chosen[-1], across_namespaces) + "\x00", int(rv))}
    if not filtered:
        meta["remainingItemCount"] = len(rest) - limit
    return chosen, meta


def encode(start: str, rv: int) -> str:
    text = json.dumps({"v": VERSION, "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(token: str) -> tuple[str, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError) as e:
        raise bad_request(f"invalid continue token: {e}") from e
    if not isinstance(data, dict) or data.get("v") != VERSION:
        version = data.get("v") if isinstance(data, dict) else None
        raise bad_request(f"invalid continue token: continue key is not valid: server does not recognize this "
                          f"encoded version {version!r}")
    start, rv = data.get("start"), data.get("rv")
    if not isinstance(start, str) or not start or not isinstance(rv, int):
        raise bad_request("invalid continue token: continue key is not valid: encoded start key empty "
                          f"(version {VERSION})")
    return start, rv
