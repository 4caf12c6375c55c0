"""The client-side rate limit every Kubernetes request waits on: an alert storm cannot flood the API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Token bucket: `burst` requests at once, then `qps` per second; callers wait, never fail."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._qps, self._burst, self._clock = qps, float(burst), clock
        self._tokens, self._last = float(burst), clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, sleeping if needed; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self._qps
        if wait:
            time.sleep(wait)
        return wait
