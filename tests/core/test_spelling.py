"""Times spelled once and remembered (`core/alerts.py` `iso`, the cooldown rail's skip): a remembered spelling is
always the one `isoformat` gives the very object asked about, whatever instants compare equal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from reactor.core import alerts
from reactor.core.alerts import SPELLINGS_KEPT, iso
from reactor.policy.rails import _cooling

IN_UTC = datetime(2026, 12, 5, 7, 0, tzinfo=UTC)
IN_CET = IN_UTC.astimezone(timezone(timedelta(hours=1)))


def test_equal_instants_in_two_offsets_are_spelled_each_its_own_way() -> None:
    assert IN_UTC == IN_CET
    assert iso(IN_UTC) == "2026-12-05T07:00:00+00:00"
    assert iso(IN_CET) == "2026-12-05T08:00:00+01:00"
    assert iso(IN_UTC) == "2026-12-05T07:00:00+00:00"


def test_the_remembered_spellings_stay_bounded() -> None:
    moments = [IN_UTC + timedelta(seconds=s) for s in range(SPELLINGS_KEPT * 2 + 3)]
    assert [iso(m) for m in moments] == [m.isoformat() for m in moments]
    assert len(alerts._SPELLED) <= SPELLINGS_KEPT


def test_a_cooldown_skip_names_its_end_as_written() -> None:
    assert _cooling(IN_UTC, IN_UTC.utcoffset()).detail == "cooldown until 2026-12-05T07:00:00+00:00"
    assert _cooling(IN_CET, IN_CET.utcoffset()).detail == "cooldown until 2026-12-05T08:00:00+01:00"
