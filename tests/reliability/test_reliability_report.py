"""reliability/report.py: the front door's figures (issue 23) are printed and their promises checked."""

from __future__ import annotations

import pytest

from reliability.report import front_door

pytestmark = pytest.mark.component


def test_kept_promises_print_and_break_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert front_door({"notification_p99_s_64_slow_clients": 1.4,
                       "healthz_success_pct_400_idle_probe_connections": 100.0}) == []
    out = capsys.readouterr().out
    assert "notification latency p99 with 64 slow clients connected (s)  1.4" in out
    assert "/healthz success under 400 idle probe connections (%)" in out


def test_a_notification_past_alertmanagers_timeout_or_a_failed_probe_breaks_a_promise() -> None:
    broken = front_door({"notification_p99_s_64_slow_clients": 10.5,
                         "healthz_success_pct_400_idle_probe_connections": 75.0})
    assert len(broken) == 2 and "10 s timeout" in broken[0] and "every probe answered" in broken[1]


def test_nothing_is_printed_when_the_tests_did_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert front_door({}) == [] and capsys.readouterr().out == ""
