"""What one process remembers between notifications: the firings it acted on, and one lock per workload.

Both are optimisations and guards of this process only (the state on the workload and the conditional writes
are what make several replicas safe): a repeat of a firing this process applied is answered without an API
call, and two threads of this process never decide the same workload at once.

`Firings.seen` runs once per alert, so it takes no lock: a lock taken per alert, held by a thread the interpreter
switches out mid-hold, blocks every other request thread behind it, and each block is two context switches (in the
serving worker, 200–300 per 1,000-alert notification with the caches' read locks, 58 without; docs/performance.md).
Each OrderedDict operation is atomic under the interpreter lock; only `remember`'s insert-then-evict is a sequence.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence

from reactor.core.model import WorkloadRef

DEDUP_SIZE = 10_000
STRIPES = 64
OTHER_LOCK_SECONDS = 2.0  # how long a thread holding one workload waits for another's lock


class Firings:
    """The (fingerprint, startsAt) keys of the firings this process applied, the most recent `size` of them."""

    def __init__(self, size: int = DEDUP_SIZE) -> None:
        self._size = size
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, keys: Sequence[tuple[str, str]]) -> bool:
        """Whether any of `keys` was applied here; a key met again is kept as recent (no lock: see the module)."""
        found = False
        for key in keys:
            if key in self._keys:
                found = True
                with contextlib.suppress(KeyError):  # evicted by `remember` since the lookup: nothing to refresh
                    self._keys.move_to_end(key)
        return found

    def remember(self, keys: Sequence[tuple[str, str]]) -> None:
        with self._lock:
            for key in keys:
                self._keys[key] = None
                self._keys.move_to_end(key)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)


class WorkloadLocks:
    """One thread at a time per workload in this process, striped so memory stays bounded: concurrent copies of a
    notification meet the dedup cache instead of racing to a 409 and spending budget."""

    def __init__(self, stripes: int = STRIPES) -> None:
        self._locks = tuple(threading.Lock() for _ in range(stripes))

    def of(self, ref: WorkloadRef) -> threading.Lock:
        return self._locks[hash(ref) % len(self._locks)]

    @contextlib.contextmanager
    def other(self, ref: WorkloadRef, *, held: WorkloadRef | None) -> Iterator[bool]:
        """The lock of `ref` while this thread holds `held`'s: only tried, for a bounded time (two receivers
        taking each other's donors must never wait on each other), and not taken again when it is the same
        stripe. Yields whether this thread may go on; the write stays conditional either way."""
        lock = self.of(ref)
        if held is not None and lock is self.of(held):
            yield True
            return
        if not lock.acquire(timeout=OTHER_LOCK_SECONDS if held is not None else -1):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()
