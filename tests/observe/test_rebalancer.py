"""The rebalancer's waiting list (reactor/observe/rebalancer.py) with steps of the test's own: a growth waits until
its deadline, then the donor is given back; a step that raises does not stop the others; the thread ticks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from reactor.core.model import Signal, Status, WorkloadRef
from reactor.observe.rebalancer import GROW, RESTORE, Rebalancer, Waiting, Waitlist

NOW = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
EMPTY = Signal(alert="GPUSaturated", status=Status.FIRING, keys=(), container=None, value=None)


def _waiting(kind: str = GROW, name: str = "inference") -> Waiting:
    return Waiting(kind, WorkloadRef("Deployment", "ml", name), "uid", "pod", EMPTY,
                   WorkloadRef("Deployment", "ml", "training"), "pod", EMPTY, 2, "gpu-quota",
                   NOW + timedelta(minutes=10), NOW + timedelta(minutes=20) if kind == GROW else None)


class Steps:
    def __init__(self) -> None:
        self.grows = self.backs = self.restores = 0
        self.given_up: list[Waiting] = []
        self.grow_ok = self.back_ok = self.restore_ok = False

    def grow(self, w: Waiting, now: datetime) -> bool:
        self.grows += 1
        if w.receiver.name == "broken":
            raise RuntimeError("the API server is down")
        return self.grow_ok

    def give_back(self, w: Waiting, now: datetime) -> bool:
        self.backs += 1
        return self.back_ok

    def restore(self, w: Waiting, now: datetime) -> bool:
        self.restores += 1
        return self.restore_ok

    def expired(self, w: Waiting, now: datetime) -> None:
        self.given_up.append(w)

    def recover(self, now: datetime) -> list[Waiting]:
        return []

    def rebalancer(self, interval: timedelta = timedelta(seconds=15)) -> Rebalancer:
        return Rebalancer(waitlist=Waitlist(), steps=self, interval=interval, clock=lambda: NOW)


def test_a_growth_waits_then_gives_back_then_gives_up() -> None:
    steps = Steps()
    r = steps.rebalancer()
    r.waitlist.add(_waiting())
    assert r.waitlist.waiting_for(WorkloadRef("Deployment", "ml", "inference")) is not None
    assert r.tick(NOW + timedelta(minutes=5)) == 1 and (steps.grows, steps.backs) == (1, 0)
    assert r.tick(NOW + timedelta(minutes=10)) == 1 and steps.backs == 1  # the give-back is refused: tried again
    assert r.tick(NOW + timedelta(minutes=20)) == 0 and len(steps.given_up) == 1  # given up, and said


def test_a_growth_applied_or_given_back_ends() -> None:
    steps = Steps()
    r = steps.rebalancer()
    r.waitlist.add(_waiting())
    steps.back_ok = True
    assert r.tick(NOW + timedelta(minutes=11)) == 0 and steps.backs == 1 and not steps.given_up
    r.waitlist.add(_waiting())
    steps.grow_ok = True
    assert r.tick(NOW + timedelta(minutes=11)) == 0 and steps.backs == 1


def test_a_restore_waits_until_its_deadline() -> None:
    steps = Steps()
    r = steps.rebalancer()
    r.waitlist.add(_waiting(RESTORE))
    assert r.tick(NOW) == 1 and steps.restores == 1
    assert r.tick(NOW + timedelta(minutes=10)) == 0 and len(steps.given_up) == 1


def test_one_failing_step_does_not_stop_the_others() -> None:
    steps = Steps()
    r = steps.rebalancer()
    r.waitlist.add(_waiting(name="broken"))
    r.waitlist.add(_waiting(name="inference"))
    steps.grow_ok = True
    assert r.tick(NOW) == 1 and steps.grows == 2  # the broken one waits for the next pass


def test_the_thread_ticks_every_interval_and_stops() -> None:
    steps = Steps()
    ticked = threading.Event()

    def grow(w: Waiting, now: datetime) -> bool:
        ticked.set()
        return True

    steps.grow = grow  # type: ignore[method-assign]
    r = steps.rebalancer(interval=timedelta(milliseconds=10))
    r.waitlist.add(_waiting())
    r.start()
    try:
        assert ticked.wait(5)
    finally:
        r.stop()
    assert r.waiting() == []
