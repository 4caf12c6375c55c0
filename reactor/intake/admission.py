"""How many notifications the webhook decides at once, and how many may wait for a turn.

Notifications may use all the server's threads but two, so 4xx answers stay quick in a storm. When every slot is
taken, as many requests may wait (at most `WAIT_SECONDS`) as may work; one more is answered 503 at once. A waiting
room without a bound only moves the queue: under a storm every request waited its second, the server's threads were
all waiting, and new notifications queued in the server, unanswered past Alertmanager's timeout.

The slots are tokens in a `queue.SimpleQueue`, whose take and give-back are each one call into C. Every request
takes and gives back a slot, and `threading.BoundedSemaphore` does each through a Python `Condition` (a lock, a
`with`, a notify): on the 1-alert path that was ~2.5 µs of the request thread's time, paid again in the interpreter
lock's hand-offs when the threads contend (docs/performance.md).
"""

from __future__ import annotations

import queue

WAIT_SECONDS = 1.0  # a waiting notification's longest wait for a slot before its 503


class Slots:
    """`size` tokens: `take` one (waiting at most `timeout` seconds, or not at all), `give_back` it."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"slots: need at least one, got {size}")
        self._size = size
        self._free: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(size):
            self._free.put(None)

    def take(self, timeout: float | None = None) -> bool:
        """A token, at once (`timeout` None) or within `timeout` seconds; False if none came."""
        try:
            self._free.get(block=timeout is not None, timeout=timeout)
        except queue.Empty:
            return False
        return True

    def give_back(self) -> None:
        """Return a token taken. Giving back one never taken is a bug, raised as `BoundedSemaphore` raises it: while
        a thread holds a token, fewer than `size` are free, so a full queue means nobody holds one."""
        if self._free.qsize() >= self._size:
            raise ValueError("slots: a token was given back that was never taken")
        self._free.put(None)

    def free(self) -> int:
        return self._free.qsize()


class Admission:
    """The webhook's slots for notifications being decided, and its bounded waiting room."""

    def __init__(self, size: int, *, wait_seconds: float = WAIT_SECONDS) -> None:
        self._working = Slots(size)
        self._waiting = Slots(size)
        self._wait_seconds = wait_seconds

    def admit(self) -> bool:
        """A slot now; else a wait of at most `wait_seconds` if the waiting room has a seat; else no, at once."""
        if self._working.take():
            return True
        if not self._waiting.take():
            return False
        try:
            return self._working.take(self._wait_seconds)
        finally:
            self._waiting.give_back()

    def done(self) -> None:
        """The slot of an admitted notification, given back."""
        self._working.give_back()
