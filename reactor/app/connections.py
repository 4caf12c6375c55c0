"""Which connections an asyncio listener keeps when there are too many: per-source caps and idle eviction.

Why: a listener that refuses new connections once full is held by whoever fills it first. 400 idle sockets on
the probe port, each kept until its head deadline and reopened at once, left no room for the kubelet's
/healthz, and the kubelet would restart a healthy reactor. Here a full listener (or a full source) makes room
by closing its oldest idle connection — one that has not sent a whole request head — so a client that sends its
request at once (a probe, Alertmanager) is always let in, and one source (a pod's IP) can hold at most its share.
A connection whose head is complete is being answered and is never evicted — nor is one whose whole head already
waits in the kernel unread (`Slot.sent_head`): a probe that connected just before a burst of idle connections from
its own address (the node's IP, where the kubelet probes from) has sent its request, and the burst has not, though
the loop accepts the burst before it reads the probe's bytes.

Pure bookkeeping, no I/O: eviction is a callback (the transport's abort). Used from one event loop thread.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False)
class Slot:
    """One admitted connection: its source, and how to close it when evicted."""

    source: str
    evict: Callable[[], None]
    sent_head: Callable[[], bool] = lambda: False  # its whole head is waiting to be read: never evicted
    idle: bool = True
    released: bool = False


@dataclass
class Connections:
    """At most `total` connections, at most `per_source` from one source address; evicting the oldest idle."""

    total: int
    per_source: int
    evicted: int = 0
    refused: int = 0
    _idle: OrderedDict[Slot, None] = field(default_factory=OrderedDict)
    _by_source: Counter[str] = field(default_factory=Counter)
    _open: int = 0

    @property
    def open(self) -> int:
        return self._open

    def admit(self, source: str, evict: Callable[[], None],
              sent_head: Callable[[], bool] = lambda: False) -> Slot | None:
        """A slot for a new connection from `source`, after evicting what must go; None: refuse it (every
        connection in its way is busy answering, or has sent its whole head)."""
        if self._by_source[source] >= self.per_source and not self._evict_oldest(source):
            self.refused += 1
            return None
        if self._open >= self.total and not self._evict_oldest(None):
            self.refused += 1
            return None
        slot = Slot(source, evict, sent_head)
        self._idle[slot] = None
        self._by_source[source] += 1
        self._open += 1
        return slot

    def busy(self, slot: Slot) -> None:
        """The connection's request head is complete: it is being answered, never evicted."""
        slot.idle = False
        self._idle.pop(slot, None)

    def release(self, slot: Slot) -> None:
        """The connection ended (answered, dropped or evicted); idempotent."""
        if slot.released:
            return
        slot.released = True
        self._idle.pop(slot, None)
        self._by_source[slot.source] -= 1
        if not self._by_source[slot.source]:
            del self._by_source[slot.source]
        self._open -= 1

    def _evict_oldest(self, source: str | None) -> bool:
        victim = next((s for s in self._idle if (source is None or s.source == source) and not s.sent_head()), None)
        if victim is None:
            return False
        self.release(victim)
        self.evicted += 1
        victim.evict()
        return True
