"""The object store: every object by (resource plural, namespace, name), with a global resourceVersion.

It does no validation, admission or HTTP; callers hold the cluster lock. `get` and `items` hand out
deep copies for callers that mutate; `view` and `dependents` hand out the stored objects themselves,
which callers must only read (a stored object is never mutated: `put` stores a fresh copy). Every
change is recorded in the watch `History`, passed to the `observers` (incremental quota usage) and
wakes the watches waiting on `changed`. Indexes: by resource, by owner uid, by uid.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from reactor_sim.history import Change, History

Obj = dict[str, Any]
Key = tuple[str, str, str]
Observer = Callable[[str, Change], None]


def clone(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars): what copy.deepcopy does, several times faster."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


class Store:
    def __init__(self, history: int | None = None) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.history = History(history) if history is not None else History()
        self.observers: list[Observer] = []
        self._objects: dict[Key, Obj] = {}
        self._by_plural: dict[str, dict[tuple[str, str], Obj]] = {}
        self._dependents: dict[str | None, set[Key]] = {}  # owner uid -> objects naming it in ownerReferences
        self._uids: Counter[str] = Counter()
        self._rv = 0
        self._uid = 0

    @property
    def resource_version(self) -> int:
        return self._rv

    def next_uid(self) -> str:
        self._uid += 1
        return f"00000000-0000-4000-8000-{self._uid:012x}"

    def get(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._objects.get((plural, namespace or "", name))
        return clone(obj) if obj is not None else None

    def exists(self, plural: str, namespace: str | None, name: str) -> bool:
        return (plural, namespace or "", name) in self._objects

    def put(self, plural: str, obj: Obj) -> Obj:
        """Store (create or replace) and stamp a new resourceVersion; returns a copy of what is stored."""
        return clone(self._put(plural, clone(obj)))

    def adopt(self, plural: str, obj: Obj) -> Obj:
        """`put` without the copies, for a caller that hands `obj` over: it must never mutate it again.
        Returns the stored object itself (read only)."""
        return self._put(plural, obj)

    def _put(self, plural: str, stored: Obj) -> Obj:
        self._rv += 1
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        meta = stored["metadata"]
        key = (plural, meta.get("namespace") or "", meta["name"])
        prev = self._objects.get(key)
        if prev is not None:
            self._unindex(key, prev)
        self._index(key, stored)
        self._record(plural, Change(self._rv, stored, prev))
        return stored

    def delete(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        key = (plural, namespace or "", name)
        obj = self._objects.get(key)
        if obj is not None:
            self._unindex(key, obj)
            self._rv += 1
            self._record(plural, Change(self._rv, None, obj))
        return obj

    def _index(self, key: Key, obj: Obj) -> None:
        self._objects[key] = obj
        self._by_plural.setdefault(key[0], {})[(key[1], key[2])] = obj
        self._uids[obj["metadata"].get("uid", "")] += 1
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._dependents.setdefault(ref.get("uid"), set()).add(key)

    def _unindex(self, key: Key, obj: Obj) -> None:
        del self._objects[key]
        del self._by_plural[key[0]][(key[1], key[2])]
        uid = obj["metadata"].get("uid", "")
        self._uids[uid] -= 1
        if not self._uids[uid]:
            del self._uids[uid]
        for ref in obj["metadata"].get("ownerReferences") or []:
            keys = self._dependents.get(ref.get("uid"))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._dependents[ref.get("uid")]

    def _record(self, plural: str, change: Change) -> None:
        for observe in self.observers:
            observe(plural, change)
        with self.changed:
            self.history.record(plural, change)
            self.changed.notify_all()

    def view(self, plural: str, namespace: str | None = None) -> list[Obj]:
        """The stored objects of one resource (one namespace, or all), sorted by namespace and name: read only."""
        objs = self._by_plural.get(plural, {})
        keys = sorted(k for k in objs if namespace is None or k[0] == namespace)
        return [objs[k] for k in keys]

    def items(self, plural: str, namespace: str | None = None) -> Iterator[Obj]:
        """Copies of the objects of one resource (one namespace, or all), sorted by namespace and name."""
        for obj in self.view(plural, namespace):
            yield clone(obj)

    def count(self, plural: str, namespace: str | None = None) -> int:
        objs = self._by_plural.get(plural, {})
        return len(objs) if namespace is None else sum(1 for k in objs if k[0] == namespace)

    def dependents(self, owner_uid: str, plural: str | None = None) -> list[tuple[Key, Obj]]:
        """The stored objects (read only) whose ownerReferences name this uid, sorted by key."""
        keys = sorted(k for k in self._dependents.get(owner_uid, ()) if plural is None or k[0] == plural)
        return [(k, self._objects[k]) for k in keys]

    def orphans(self) -> list[Key]:
        """Objects with ownerReferences of which no owner exists (by uid), sorted."""
        out = set()
        for uid, keys in self._dependents.items():
            if uid in self._uids:
                continue
            for key in keys:
                refs = self._objects[key]["metadata"].get("ownerReferences") or []
                if all(r.get("uid") not in self._uids for r in refs):
                    out.add(key)
        return sorted(out)

    def all_keys(self) -> list[Key]:
        return sorted(self._objects)

    def uids(self) -> set[str]:
        return set(self._uids)
