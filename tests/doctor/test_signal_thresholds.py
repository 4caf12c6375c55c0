"""`reactor doctor`'s busy-signal check reads the choice from rules/thresholds.yaml: a file that does not validate
is one failing line naming its key, before Prometheus is asked anything."""

from __future__ import annotations

from pathlib import Path

from reactor.config.settings import build_settings
from reactor.tools.doctor import signal_checks
from reactor.tools.doctor.report import Status


def test_a_bad_signal_in_the_thresholds_fails_the_check_and_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("namespaces:\n  ml-serving:\n    signal: sm_busy\n", encoding="utf-8")
    settings = build_settings({"namespaces": {"allow": ["ml-serving"]}}, {})
    (check,) = signal_checks("http://127.0.0.1:9", path, settings)  # nothing listens there: never asked
    assert (check.name, check.status) == ("busy-signal", Status.FAILING)
    assert "namespaces.ml-serving.signal" in check.detail and "sm_busy" in check.detail
