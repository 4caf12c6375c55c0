"""Watch semantics of kube-apiserver's watch cache (staging/src/k8s.io/apiserver/pkg/storage/cacher):
which WatchEvents a `?watch=1` request gets, from which resourceVersion, through which selectors.

It turns the store's `History` into event dicts; callers hold the store lock. It does no HTTP and no
waiting (the server streams and waits on `Store.changed`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactor_sim.history import Change
from reactor_sim.registry import Resource
from reactor_sim.selectors import SelectorError, parse_fields, parse_labels
from reactor_sim.status import ApiError, bad_request
from reactor_sim.store import Store

Obj = dict[str, Any]
MIN_REQUEST_TIMEOUT = 1800  # kube-apiserver --min-request-timeout: a watch without timeoutSeconds lasts 1-2x this


@dataclass(frozen=True)
class Options:
    """What one watch request asked for, checked: bad selectors or numbers are a 400 before streaming."""

    resource: Resource
    namespace: str | None
    labels: Callable[[dict[str, str]], bool]
    fields: Callable[[Obj], bool]
    resource_version: str
    timeout: float
    bookmarks: bool

    def matches(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels(meta.get("labels") or {}) and self.fields(obj)


def flag(query: dict[str, str], name: str) -> bool:
    """A boolean query parameter as apimachinery's Convert_Slice_string_To_bool reads it (and RBAC's
    RequestInfo with it): present and neither "0" nor "false" (any case) is true."""
    return name in query and query[name].lower() not in ("0", "false")


def is_watch(query: dict[str, str]) -> bool:
    return flag(query, "watch")


def options(res: Resource, namespace: str | None, query: dict[str, str]) -> Options:
    try:
        labels, fields = parse_labels(query.get("labelSelector")), parse_fields(query.get("fieldSelector"), res.plural)
    except SelectorError as e:
        raise bad_request(str(e)) from e
    rv = query.get("resourceVersion", "")
    if rv and not rv.isdigit():
        raise bad_request(f'invalid resource version "{rv}"')
    timeout = _timeout(query.get("timeoutSeconds"))
    return Options(res, namespace if res.namespaced else None, labels, fields, rv, timeout,
                   flag(query, "allowWatchBookmarks"))


def _timeout(text: str | None) -> float:
    if not text:
        return float(random.uniform(MIN_REQUEST_TIMEOUT, 2 * MIN_REQUEST_TIMEOUT))
    if not text.isdigit():
        raise bad_request(f'invalid value for timeoutSeconds: "{text}"')
    return float(text)


def expired(requested: int, horizon: int) -> ApiError:
    """errors.NewResourceExpired, as the watch cache answers a resourceVersion older than its window."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({horizon})")


def begin(store: Store, opts: Options) -> tuple[list[Obj], int | None]:
    """The first events and the resourceVersion they reach; (an ERROR event, None) when the requested
    resourceVersion is older than the history kept: upstream's errWatcher sends that in a 200 stream."""
    if opts.resource_version in ("", "0"):
        return initial_events(store, opts), store.resource_version
    requested = int(opts.resource_version)
    horizon = store.history.horizon(opts.resource.plural)
    if requested < horizon:
        return [{"type": "ERROR", "object": expired(requested, horizon).body()}], None
    return events_after(store, opts, requested)


def initial_events(store: Store, opts: Options) -> list[Obj]:
    """Synthetic ADDED events for the current state, as for a watch from resourceVersion unset or 0."""
    return [{"type": "ADDED", "object": o} for o in store.items(opts.resource.plural, opts.namespace)
            if opts.matches(o)]


def events_after(store: Store, opts: Options, rv: int) -> tuple[list[Obj], int]:
    """The events of this watch after `rv`, and the resourceVersion the watch has now seen up to."""
    events = [e for e in (to_event(c, opts) for c in store.history.since(opts.resource.plural, rv)) if e]
    return events, store.resource_version


def to_event(change: Change, opts: Options) -> Obj | None:
    """cacheWatcher.convertToWatchEvent: an object leaving the selection is DELETED (its previous content
    at the new resourceVersion), one entering it is ADDED, one staying in it is MODIFIED."""
    now = change.obj is not None and opts.matches(change.obj)
    before = change.prev is not None and opts.matches(change.prev)
    if now and change.obj is not None:
        return {"type": "MODIFIED" if before else "ADDED", "object": change.obj}
    if before and change.prev is not None:
        meta = dict(change.prev["metadata"], resourceVersion=str(change.rv))
        return {"type": "DELETED", "object": dict(change.prev, metadata=meta)}
    return None


def bookmark(res: Resource, rv: int) -> Obj:
    """A BOOKMARK: an object of the watched kind carrying only metadata.resourceVersion."""
    return {"type": "BOOKMARK", "object": {"kind": res.kind, "apiVersion": res.api_version,
                                           "metadata": {"resourceVersion": str(rv)}}}
