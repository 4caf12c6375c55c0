"""CI runs the long reliability form after the test suite (issue 22: it was not run, and promises broke unseen)."""

from __future__ import annotations

import re

from tests.reliability.conftest import REPO


def commands(path: str) -> list[str]:
    """The script's lines that run something: comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in (REPO / path).read_text().splitlines())
    return [line for line in lines if line]


def test_ci_runs_the_long_reliability_form_after_the_tests() -> None:
    ran = commands(".ci/run")
    steps = [m.group(1) for m in (re.search(r"\bmake (\w+)", line) for line in ran) if m]
    assert steps == ["lint", "test", "reliability"], ran
    assert "set -euo pipefail" in ran  # a failing step fails the run


def test_make_reliability_is_the_long_form() -> None:
    recipe = commands("Makefile")
    target = recipe.index("reliability: $(STAMP)")
    assert recipe[target + 1] == "$(PY) reliability/report.py"  # without --short: RELIABILITY_LONG=1
