"""The one backoff (reactor/core/backoff.py) and the three places that wait with it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reactor.cluster.kube.failures import MAX_RETRY_AFTER, backoff
from reactor.core.backoff import doubling


@pytest.mark.parametrize(("failures", "seconds"), [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 30.0), (10_000, 30.0),
                                                    (-1, 0.5)])
def test_the_wait_doubles_from_the_first_delay_up_to_the_cap(failures: int, seconds: float) -> None:
    assert doubling(failures, first=0.5, cap=30.0) == seconds


def test_the_api_retry_waits_the_same_way() -> None:
    assert [backoff(a) for a in range(4)] == [0.1, 0.2, 0.4, 0.8]
    assert backoff(200) == MAX_RETRY_AFTER


def test_the_verifiers_refused_revert_waits_from_its_interval_up_to_ten_minutes() -> None:
    interval = timedelta(seconds=15).total_seconds()
    waits = [doubling(tries - 1, first=interval, cap=600.0) for tries in (1, 2, 3, 7)]
    assert waits == [15.0, 30.0, 60.0, 600.0]
