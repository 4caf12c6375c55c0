"""An alert's numbers are remembered by their spellings (`intake/alerts.py` `_numbers`), and only short spellings
are kept: a sender posting long ones must not fill the memo."""

from __future__ import annotations

import pytest

from reactor.core.errors import InvalidPayload
from reactor.intake import alerts
from reactor.intake.alerts import KEPT_SPELLING, _numbers


def test_short_spellings_are_remembered_and_read_as_before() -> None:
    alerts._NUMBERS.clear()
    first = _numbers({"value": "0.05", "gpus": "8", "idle_gpus": "6"}, "alerts[0]")
    assert first == {"value": 0.05, "gpus": 8, "idle_gpus": 6}
    assert _numbers({"value": "0.05", "gpus": "8", "idle_gpus": "6", "summary": "another"}, "alerts[1]") is first
    assert len(alerts._NUMBERS) == 1


def test_long_spellings_are_read_but_not_kept() -> None:
    alerts._NUMBERS.clear()
    long_zero = "0." + "0" * KEPT_SPELLING + "1"
    assert _numbers({"value": long_zero, "gpus": "1"}, "alerts[0]")["value"] == pytest.approx(0.0)
    assert alerts._NUMBERS == {}


def test_a_bad_number_is_named_by_its_alert_every_time() -> None:
    for where in ("alerts[0]", "alerts[7]"):
        with pytest.raises(InvalidPayload) as caught:
            _numbers({"value": "0.5", "gpus": "2.5"}, where)
        assert caught.value.field == f"{where}.annotations.gpus"


def test_a_long_number_is_not_remembered_by_the_spelling_cache() -> None:
    alerts._float.cache_clear()
    alerts._NUMBERS.clear()
    long_zero = "0." + "0" * KEPT_SPELLING + "1"
    _numbers({"value": long_zero}, "alerts[0]")
    _numbers({"value": "0.25"}, "alerts[1]")
    assert alerts._float.cache_info().currsize == 1  # "0.25" only
