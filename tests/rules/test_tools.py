"""A missing tool skips with a reason, except under PROMSTACK_REQUIRED=1, where it fails."""

from __future__ import annotations

import pytest

from tests.rules.conftest import require_tool


def test_missing_tool_skips_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMSTACK_REQUIRED", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-promtool not found .*apt-get install"):
        require_tool("no-such-promtool")


def test_missing_tool_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMSTACK_REQUIRED", "1")
    with pytest.raises(pytest.fail.Exception, match="PROMSTACK_REQUIRED=1 forbids skipping"):
        require_tool("no-such-promtool")


def test_present_tool_is_found() -> None:
    assert require_tool("sh").endswith("/sh")
