"""The rebalances that wait for the API server: a receiver's growth until its quota shows the room the donor
freed, a donor's restore until the quota shows room for what it gave.

The donor's change is written first, within the notification; the receiver's growth is never written on the
reactor's own arithmetic. A background thread (like the verifier's, started and stopped by the runner) asks again
every `verify.interval`: each waiting step is re-decided by the engine from the cluster as read now (the
ResourceQuota's status.used, every rail again). A receiver that cannot grow by `verify.timeout` after the donor's
write gives the donor its GPUs back; a give-back or a restore that cannot be applied within another
`verify.timeout` is dropped and said (a log line, `reactor_rebalances_total{result="not-restored"}`): the list is
bounded in time as in size.

The list is in memory; what a restart would lose is found again from the cluster: each pass first asks the
steps' `recover` for donors whose sealed `rebalance` record is older than `verify.timeout` while their receiver
holds no record of receiving (it never grew), and gives those back as if their growth had timed out here. The
engine's rebalancing holds the steps (`Steps`); `Waitlist` holds the list; `Rebalancer` the pass and its clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from reactor.core.model import Signal, WorkloadRef
from reactor.observe.periodic import Periodic, PeriodicPart

log = logging.getLogger(__name__)

GROW = "grow"
RESTORE = "restore"
GIVE_BACK = "give-back"  # a donor a restart left waiting (the engine's `recover` finds it): give back, no growth
MAX_WAITING = 1000  # rebalances waiting at once; more are refused at the source (the engine asks `full`)


@dataclass(frozen=True, slots=True)
class Waiting:
    """One step that waits: `kind` GROW (the receiver, with its saved signal) or RESTORE (the donor)."""

    kind: str
    receiver: WorkloadRef
    receiver_uid: str
    receiver_pod: str  # a pod of the receiver: resolved again to its owner, as a notification does
    receiver_signal: Signal
    donor: WorkloadRef
    donor_pod: str
    donor_signal: Signal
    gpus: int
    quota: str
    deadline: datetime  # GROW: the donor is given back from then on; RESTORE: given up then
    until: datetime | None = None  # GROW: a give-back still refused then (its room never showed) is given up
    since: datetime | None = None  # GIVE_BACK: when the donor's record says it gave (the record's identity)
    donor_uid: str = ""  # the donor as read when it gave: the receiver's record names it (no read per attempt)

    @property
    def key(self) -> tuple[str, WorkloadRef, WorkloadRef]:
        return self.kind, self.receiver, self.donor


class Steps(Protocol):
    """What a pass does with each waiting step (the engine's rebalancing, engine/rebalancing.py). Each step answers
    True when it is over (applied, or it can never be)."""

    def grow(self, waiting: Waiting, now: datetime) -> bool: ...

    def give_back(self, waiting: Waiting, now: datetime) -> bool: ...

    def restore(self, waiting: Waiting, now: datetime) -> bool: ...

    def expired(self, waiting: Waiting, now: datetime) -> None: ...

    def recover(self, now: datetime) -> list[Waiting]: ...


class Waitlist:
    """The rebalances that wait, bounded, and the last refusal of each waiting growth (said with its give-back)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, WorkloadRef, WorkloadRef], Waiting] = {}
        self._refusals: dict[tuple[str, WorkloadRef, WorkloadRef], str] = {}
        self._lock = threading.Lock()

    def add(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiting[waiting.key] = waiting

    def add_found(self, waiting: Waiting) -> None:
        """A step found again after a restart: added unless the list is full or already holds it."""
        with self._lock:
            if len(self._waiting) < MAX_WAITING:
                self._waiting.setdefault(waiting.key, waiting)

    def discard(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiting.pop(waiting.key, None)
            self._refusals.pop(waiting.key, None)

    def done(self, waiting: Waiting) -> None:
        """`waiting` is over: removed, unless a newer step of the same key replaced it meanwhile."""
        with self._lock:
            if self._waiting.get(waiting.key) is waiting:
                del self._waiting[waiting.key]

    def waiting_for(self, receiver: WorkloadRef) -> Waiting | None:
        """The growth that waits for `receiver`, if one does."""
        with self._lock:
            return next((w for w in self._waiting.values() if w.kind == GROW and w.receiver == receiver), None)

    def full(self) -> bool:
        with self._lock:
            return len(self._waiting) >= MAX_WAITING

    def waiting(self) -> list[Waiting]:
        with self._lock:
            return list(self._waiting.values())

    def refused(self, waiting: Waiting, why: str) -> None:
        with self._lock:
            self._refusals[waiting.key] = why[:300]

    def last_refusal(self, waiting: Waiting) -> str | None:
        with self._lock:
            return self._refusals.get(waiting.key)

    def forget_refusal(self, waiting: Waiting) -> None:
        with self._lock:
            self._refusals.pop(waiting.key, None)


class Rebalancer(PeriodicPart):
    """The pass over the waiting list, on its own thread; `tick` is one pass (tests call it with their clock)."""

    def __init__(self, *, waitlist: Waitlist, steps: Steps, interval: timedelta,
                 clock: Callable[[], datetime]) -> None:
        self.waitlist, self.steps, self.interval, self.clock = waitlist, steps, interval, clock
        # A lambda, not the bound method: the pass is looked up each time (tests replace it on the instance).
        self._loop = Periodic("reactor-rebalancer", self.interval.total_seconds(), lambda: self.tick(),
                              "rebalance pass failed")

    def waiting(self) -> list[Waiting]:
        return self.waitlist.waiting()

    def tick(self, now: datetime | None = None) -> int:
        """One pass: each waiting step is tried once; the number still waiting after it."""
        now = now or self.clock()
        try:
            for found in self.steps.recover(now):
                self.waitlist.add_found(found)
        except Exception:  # noqa: BLE001 - the waiting steps still run; the scan is tried again next pass
                log.exception("rebalance recovery scan failed")
        for waiting in self.waitlist.waiting():
            try:
                done = self._step(waiting, now)
            except Exception:  # noqa: BLE001 - one step's failure must not stop the others; tried again next pass
                log.exception("rebalance step failed", extra={"workload": str(waiting.receiver)})
                done = False
            if done:
                self.waitlist.done(waiting)
        return len(self.waitlist.waiting())

    def _step(self, waiting: Waiting, now: datetime) -> bool:
        """One step of a waiting rebalance; True when it is over."""
        if waiting.kind == GIVE_BACK:
            return self.steps.give_back(waiting, now) or self._expired(waiting, now, waiting.deadline)
        if waiting.kind == GROW:
            if self.steps.grow(waiting, now):
                return True
            if now < waiting.deadline or self.steps.give_back(waiting, now):
                return now >= waiting.deadline
            return self._expired(waiting, now, waiting.until)
        return self.steps.restore(waiting, now) or self._expired(waiting, now, waiting.deadline)

    def _expired(self, waiting: Waiting, now: datetime, end: datetime | None) -> bool:
        """Past `end` (None: no end), the step is given up (`Steps.expired`), and over."""
        if end is None or now < end:
            return False
        self.steps.expired(waiting, now)
        return True

