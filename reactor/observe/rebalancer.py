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
engine's `recover` for donors whose sealed `rebalance` record is older than `verify.timeout` while their receiver
holds no record of receiving (it never grew), and gives those back as if their growth had timed out here. The
engine holds the step functions; this holds the list and the clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reactor.core.model import Signal, WorkloadRef
from reactor.observe.periodic import Periodic

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


# The engine's steps: each answers True when the step is over (applied, or it can never be).
Step = Callable[[Waiting, datetime], bool]


class Rebalancer:
    """The waiting list and its thread; `tick` is one pass (tests call it with their clock)."""

    def __init__(self, *, interval: timedelta, clock: Callable[[], datetime], grow: Step, give_back: Step,
                 restore: Step, expired: Callable[[Waiting, datetime], None],
                 recover: Callable[[datetime], list[Waiting]] | None = None) -> None:
        self.interval, self.clock, self._recover = interval, clock, recover
        self._grow, self._give_back, self._restore, self._expired = grow, give_back, restore, expired
        self._waiting: dict[tuple[str, WorkloadRef, WorkloadRef], Waiting] = {}
        self._lock = threading.Lock()
        # A lambda, not the bound method: the pass is looked up each time (tests replace it on the instance).
        self._loop = Periodic("reactor-rebalancer", self.interval.total_seconds(), lambda: self.tick(),
                              "rebalance pass failed")

    def add(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiting[waiting.key] = waiting

    def discard(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiting.pop(waiting.key, None)

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

    def tick(self, now: datetime | None = None) -> int:
        """One pass: each waiting step is tried once; the number still waiting after it."""
        now = now or self.clock()
        if self._recover is not None:
            try:
                for found in self._recover(now):
                    with self._lock:
                        if len(self._waiting) < MAX_WAITING:
                            self._waiting.setdefault(found.key, found)
            except Exception:  # noqa: BLE001 - the waiting steps still run; the scan is tried again next pass
                log.exception("rebalance recovery scan failed")
        for waiting in self.waiting():
            try:
                done = self._step(waiting, now)
            except Exception:  # noqa: BLE001 - one step's failure must not stop the others; tried again next pass
                log.exception("rebalance step failed", extra={"workload": str(waiting.receiver)})
                done = False
            if done:
                with self._lock:
                    if self._waiting.get(waiting.key) is waiting:
                        del self._waiting[waiting.key]
        return len(self.waiting())

    def _step(self, waiting: Waiting, now: datetime) -> bool:
        if waiting.kind == GIVE_BACK:
            if self._give_back(waiting, now):
                return True
            if now >= waiting.deadline:
                self._expired(waiting, now)
                return True
            return False
        if waiting.kind == GROW:
            if self._grow(waiting, now):
                return True
            if now < waiting.deadline or self._give_back(waiting, now):
                return now >= waiting.deadline
            if waiting.until is not None and now >= waiting.until:
                self._expired(waiting, now)
                return True
            return False
        if self._restore(waiting, now):
            return True
        if now >= waiting.deadline:
            self._expired(waiting, now)
            return True
        return False

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)

    def run_once(self) -> object:
        """One pass of the thread (reactor/app/background.py)."""
        return self.tick()
