"""The watch-fed store: the last known state of each cached object, as raw dicts keyed (kind, namespace, name).

Informers (reactor/cluster/informer.py) fill it; the notification's `Reader` (reactor/resolve/owners.py) reads it. It
answers three ways: the object, `None` ("does not exist": the kind is cached and the namespace synced),
or `MISS` (not cached here: ask the API). It never talks to the API server itself, and it keeps no
`metadata.managedFields` (the reactor never reads them and they are often half of an object's size).
Objects handed out are shared: callers must not change them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

Obj = dict[str, Any]
ALL = ""  # the scope of a cluster-wide list/watch (and of cluster-scoped kinds)


class Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Final = Miss()


class Store:
    """Objects of the cached kinds, and which (kind, scope) pairs have finished their first list."""

    def __init__(self, kinds: frozenset[str]) -> None:
        self.kinds = kinds
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in kinds}
        self._synced: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    # --- reads ----------------------------------------------------------------------------

    def lookup(self, kind: str, namespace: str, name: str) -> Obj | None | Miss:
        """The object; None when a synced cache does not hold it; MISS when this store cannot say."""
        if not self.synced_for(kind, namespace):
            return MISS
        with self._lock:
            return self._objects[kind].get((namespace, name))

    def objects(self, kind: str, namespace: str) -> list[Obj] | Miss:
        """Every cached object of a kind in a namespace (ALL for cluster-scoped kinds), or MISS."""
        if not self.synced_for(kind, namespace):
            return MISS
        with self._lock:
            return [o for (ns, _), o in self._objects[kind].items() if ns == namespace]

    def select(self, kind: str, keep: Callable[[Obj], bool]) -> list[Obj]:
        """Every cached object of `kind`, in any namespace, that `keep` holds for ([] for a kind not cached): the
        verifier's scan for pending verifications, done in memory."""
        with self._lock:
            objects = list(self._objects.get(kind, {}).values())
        return [o for o in objects if keep(o)]

    def synced_for(self, kind: str, namespace: str) -> bool:
        with self._lock:
            return kind in self.kinds and ((kind, namespace) in self._synced or (kind, ALL) in self._synced)

    def count(self) -> int:
        with self._lock:
            return sum(len(objs) for objs in self._objects.values())

    def counts(self) -> dict[str, int]:
        """Objects held per kind (reactor_cache_objects, read at scrape time)."""
        with self._lock:
            return {kind: len(objs) for kind, objs in self._objects.items()}

    # --- writes (informers only) ---------------------------------------------------------

    def replace(self, kind: str, scope: str, items: list[Obj]) -> None:
        """A (re)list: the scope's objects become exactly `items`, and the scope counts as synced."""
        fresh = {_key(o): _trimmed(o) for o in items}
        with self._lock:
            table = self._objects[kind]
            for key in [k for k in table if scope == ALL or k[0] == scope]:
                del table[key]
            table.update(fresh)
            self._synced.add((kind, scope))

    def apply(self, kind: str, event_type: str, obj: Obj) -> None:
        """One ADDED / MODIFIED / DELETED watch event."""
        key = _key(obj)
        with self._lock:
            if event_type == "DELETED":
                self._objects[kind].pop(key, None)
            else:
                self._objects[kind][key] = _trimmed(obj)

    def unsync(self, kind: str, scope: str) -> None:
        """The scope's watch is broken beyond resuming: until its relist, reads go to the API."""
        with self._lock:
            self._synced.discard((kind, scope))


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ALL), str(meta.get("name") or "")


def _trimmed(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
