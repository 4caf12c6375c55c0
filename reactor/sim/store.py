"""The object store: every object by (resource plural, namespace, name), with a global resourceVersion.

It does no validation, admission or HTTP; callers hold the cluster lock. It keeps deep copies so no
caller can mutate stored state by accident.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._objects: dict[Key, Obj] = {}
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
        return copy.deepcopy(obj) if obj is not None else None

    def exists(self, plural: str, namespace: str | None, name: str) -> bool:
        return (plural, namespace or "", name) in self._objects

    def put(self, plural: str, obj: Obj) -> Obj:
        """Store (create or replace) and stamp a new resourceVersion; returns a copy of what is stored."""
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        meta = stored["metadata"]
        self._objects[(plural, meta.get("namespace") or "", meta["name"])] = stored
        return copy.deepcopy(stored)

    def delete(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._objects.pop((plural, namespace or "", name), None)
        if obj is not None:
            self._rv += 1
        return obj

    def items(self, plural: str, namespace: str | None = None) -> Iterator[Obj]:
        """Copies of the objects of one resource (one namespace, or all), sorted by namespace and name."""
        keys = sorted(k for k in self._objects if k[0] == plural and (namespace is None or k[1] == namespace))
        for key in keys:
            yield copy.deepcopy(self._objects[key])

    def all_keys(self) -> list[Key]:
        return sorted(self._objects)

    def uids(self) -> set[str]:
        return {o["metadata"].get("uid", "") for o in self._objects.values()}
