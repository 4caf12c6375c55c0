"""A bounded memo shared by request threads: what the request path computed lately, kept without a lock.

Several per-alert and per-notification results repeat from one notification to the next (an answer's decision part,
a time's spelling, an alert's numbers). Each is kept in a `Memo`: a dict whose every operation is atomic under the
interpreter lock, so request threads read and add without a lock (a lock taken per alert queues every request
thread behind a holder switched out: docs/performance.md). When full it is simply started again — no order to keep,
nothing to evict one by one — so its size stays bounded whatever the senders send.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V]):
    """A dict of at most `limit` entries; `keep` adds one, starting again when full."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: K, value: V) -> V:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
