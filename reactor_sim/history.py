"""The watch history: a bounded ring of the recent changes of each resource, as kube-apiserver's watch
cache keeps them (staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go), to resume watches.

It holds references to stored objects, which the store never mutates once stored; it does no
filtering, no HTTP and no locking of its own (the store records into it under its lock).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
DEFAULT_CAPACITY = 4096  # changes kept per resource; older resourceVersions are "too old" once dropped


@dataclass(frozen=True, slots=True)
class Change:
    """One write: `obj` is the object after it (None for a delete), `prev` the one before (None for a create)."""

    rv: int
    obj: Obj | None
    prev: Obj | None


class History:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"the watch history needs room for at least one change, not {capacity}")
        self.capacity = capacity
        self._rings: dict[str, deque[Change]] = {}
        self._dropped: set[str] = set()

    def record(self, plural: str, change: Change) -> None:
        ring = self._rings.setdefault(plural, deque(maxlen=self.capacity))
        if len(ring) == self.capacity:
            self._dropped.add(plural)
        ring.append(change)

    def horizon(self, plural: str) -> int:
        """The oldest resourceVersion a watch can resume from (upstream's `oldest-1`): 0 while no change
        of this resource was dropped (the history starts with the empty cluster), else the oldest kept - 1."""
        ring = self._rings.get(plural)
        if plural not in self._dropped or not ring:
            return 0
        return ring[0].rv - 1

    def since(self, plural: str, rv: int) -> list[Change]:
        """The kept changes of one resource after `rv`, oldest first."""
        out: list[Change] = []
        for change in reversed(self._rings.get(plural, ())):
            if change.rv <= rv:
                break
            out.append(change)
        out.reverse()
        return out
