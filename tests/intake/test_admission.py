"""The webhook's admission: as many notifications decided at once as it has slots, as many waiting at most
`wait_seconds`, and one more refused at once (the 503 Alertmanager retries)."""

from __future__ import annotations

import threading
import time

import pytest

from reactor.intake.admission import Admission, Slots


def test_slots_are_taken_until_none_is_left_and_given_back() -> None:
    slots = Slots(2)
    assert slots.take() and slots.take()
    assert not slots.take()
    slots.give_back()
    assert slots.free() == 1 and slots.take()


def test_a_token_never_taken_cannot_be_given_back() -> None:
    slots = Slots(1)
    with pytest.raises(ValueError, match="never taken"):
        slots.give_back()
    assert slots.take() and not slots.take()  # the refused give-back added nothing


def test_slots_need_one_at_least() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Slots(0)


def test_a_take_waits_for_a_token_given_back_meanwhile() -> None:
    slots = Slots(1)
    assert slots.take()
    threading.Timer(0.05, slots.give_back).start()
    started = time.monotonic()
    assert slots.take(timeout=5.0)
    assert time.monotonic() - started < 4.0


def test_a_take_gives_up_after_its_timeout() -> None:
    slots = Slots(1)
    assert slots.take()
    started = time.monotonic()
    assert not slots.take(timeout=0.05)
    assert time.monotonic() - started >= 0.04


def test_admission_lets_as_many_wait_as_work_and_refuses_one_more_at_once() -> None:
    admission = Admission(1, wait_seconds=2.0)
    assert admission.admit()  # the one slot
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(admission.admit()))
    waiter.start()
    time.sleep(0.1)  # the waiter holds the waiting room's one seat
    started = time.monotonic()
    assert not admission.admit()  # no seat: refused at once, not after the wait
    assert time.monotonic() - started < 0.5
    admission.done()  # the waiter gets the slot
    waiter.join(5)
    assert waited == [True]
    admission.done()
    assert admission.admit()


def test_a_waiting_notification_is_refused_when_no_slot_frees_in_time() -> None:
    admission = Admission(1, wait_seconds=0.05)
    assert admission.admit()
    assert not admission.admit()
    admission.done()
    assert admission.admit()  # the seat was given back with the refusal: nothing leaked
