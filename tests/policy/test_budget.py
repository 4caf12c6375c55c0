"""The storm brake: sliding windows, global and per namespace, atomic and thread-safe."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from reactor.act.budget import Budget
from reactor.policy.values import Window

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def spend(budget: Budget, namespaces: str, *, at: datetime) -> list[bool]:
    return [budget.try_spend(ns, at) for ns in namespaces.split()]


@pytest.mark.parametrize(
    ("global_window", "ns_window", "namespaces", "expected"),
    [
        (Window(3, 10 * MIN), Window(5, 10 * MIN), "a a a a", [True, True, True, False]),
        (Window(10, 10 * MIN), Window(2, 10 * MIN), "a a a b b b", [True, True, False, True, True, False]),
        (Window(3, 10 * MIN), Window(2, 10 * MIN), "a a b b", [True, True, True, False]),
        (Window(0, 10 * MIN), Window(5, 10 * MIN), "a", [False]),
    ],
    ids=["global-exhausted", "namespace-exhausted-others-not", "global-caps-across-namespaces", "zero-allows-nothing"],
)
def test_spend_until_exhausted(global_window, ns_window, namespaces, expected):
    assert spend(Budget(global_window, ns_window), namespaces, at=T0) == expected


def test_a_refusal_spends_nothing_anywhere():
    budget = Budget(Window(3, 10 * MIN), Window(1, 10 * MIN))
    assert spend(budget, "a a a b c", at=T0) == [True, False, False, True, True]
    assert budget.used(T0) == {"global": 3, "a": 1, "b": 1, "c": 1}


def test_window_slides():
    budget = Budget(Window(2, 10 * MIN), Window(2, 10 * MIN))
    assert spend(budget, "a", at=T0) == [True]
    assert spend(budget, "a", at=T0 + 5 * MIN) == [True]
    assert spend(budget, "a", at=T0 + 10 * MIN - timedelta(seconds=1)) == [False]
    assert spend(budget, "a", at=T0 + 10 * MIN) == [True]  # the first left the window exactly now
    assert budget.used(T0 + 10 * MIN) == {"global": 2, "a": 2}
    assert budget.used(T0 + 15 * MIN) == {"global": 1, "a": 1}


def test_windows_of_different_lengths():
    budget = Budget(Window(2, 1 * MIN), Window(2, 10 * MIN))
    assert spend(budget, "a a", at=T0) == [True, True]
    assert spend(budget, "a b", at=T0 + 2 * MIN) == [False, True]
    assert budget.used(T0 + 2 * MIN) == {"global": 1, "a": 2, "b": 1}


def test_namespaces_with_nothing_in_the_window_are_forgotten():
    budget = Budget(Window(100, 10 * MIN), Window(5, 10 * MIN))
    spend(budget, " ".join(f"ns{i}" for i in range(50)), at=T0)
    assert len(budget.used(T0)) == 51
    assert budget.used(T0 + 10 * MIN) == {"global": 0}
    assert budget._namespaces == {}  # memory is released, not only hidden


def test_concurrent_spending_never_exceeds_the_budget():
    budget = Budget(Window(50, 10 * MIN), Window(30, 10 * MIN))
    results: list[bool] = []
    lock = threading.Lock()

    def worker(ns: str) -> None:
        got = [budget.try_spend(ns, T0) for _ in range(40)]
        with lock:
            results.extend(got)

    threads = [threading.Thread(target=worker, args=(f"ns{i % 2}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 50
    used = budget.used(T0)
    assert used["global"] == 50 and used["ns0"] + used["ns1"] == 50 and max(used["ns0"], used["ns1"]) <= 30
