"""The storm brake: at most N actions per sliding window, globally and per namespace.

In memory and per process (several replicas each brake on their own: the budget bounds one
replica's rate). Thread-safe; the clock is an argument; memory is bounded by the windows'
action counts, and a namespace with nothing left in its window is forgotten.
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import datetime

from reactor.policy.values import Window

GLOBAL = "global"


class Budget:
    """Sliding-window action budget; `try_spend` spends in both windows or in neither."""

    def __init__(self, global_window: Window, namespace_window: Window) -> None:
        self._global_window = global_window
        self._namespace_window = namespace_window
        self._lock = threading.Lock()
        self._global: deque[datetime] = deque()
        self._namespaces: dict[str, deque[datetime]] = {}

    def try_spend(self, namespace: str, now: datetime) -> bool:
        """Spend one action for `namespace` at `now`; False (nothing spent) when either window is full."""
        with self._lock:
            self._expire(now)
            spent = self._namespaces.get(namespace, ())
            if len(self._global) >= self._global_window.actions or len(spent) >= self._namespace_window.actions:
                return False
            self._global.append(now)
            self._namespaces.setdefault(namespace, deque()).append(now)
            return True

    def refund(self, namespace: str, spent_at: datetime) -> None:
        """Give back one action spent at `spent_at` that was not applied (a lost race, a failed write)."""
        with self._lock:
            _remove_one(self._global, spent_at)
            times = self._namespaces.get(namespace)
            if times is not None:
                _remove_one(times, spent_at)
                if not times:
                    del self._namespaces[namespace]

    def used(self, now: datetime) -> dict[str, int]:
        """Actions within the windows at `now`: {"global": n, <namespace>: n, ...}, for a gauge.

        A namespace literally named "global" shares the key with the global count; the global
        count wins (it is the one the brake reports first).
        """
        with self._lock:
            self._expire(now)
            counts = {ns: len(times) for ns, times in self._namespaces.items()}
            counts[GLOBAL] = len(self._global)
            return counts

    def _expire(self, now: datetime) -> None:
        """Drop entries older than their window; forget empty namespaces (bounded memory)."""
        _drop_before(self._global, now - self._global_window.per)
        cutoff = now - self._namespace_window.per
        for ns in list(self._namespaces):
            times = self._namespaces[ns]
            _drop_before(times, cutoff)
            if not times:
                del self._namespaces[ns]


def _drop_before(times: deque[datetime], cutoff: datetime) -> None:
    """An entry at t counts while now < t + per, i.e. while t > now − per."""
    while times and times[0] <= cutoff:
        times.popleft()


def _remove_one(times: deque[datetime], moment: datetime) -> None:
    """Drop the latest entry at `moment`, if it is still in the window."""
    for i in range(len(times) - 1, -1, -1):
        if times[i] == moment:
            del times[i]
            return
