"""Locating the real Prometheus tools: skip with a visible reason, or fail where CI requires them.

`PROMSTACK_REQUIRED=1` (set by .ci/run) turns a missing tool into a failure: the rule and
end-to-end tests must never pass by skipping there. tests/promstack reuses `require_tool`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "rules"
RULE_TESTS_DIR = RULES_DIR / "tests"
INSTALL_HINT = "apt-get install --no-install-recommends prometheus prometheus-alertmanager"


def require_tool(name: str) -> str:
    """The tool's path; otherwise skip (or fail when PROMSTACK_REQUIRED=1)."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if path is not None:
        return path
    reason = f"{name} not found ({INSTALL_HINT})"
    if os.environ.get("PROMSTACK_REQUIRED") == "1":
        pytest.fail(f"{reason}; PROMSTACK_REQUIRED=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")


@pytest.fixture(scope="session")
def amtool() -> str:
    return require_tool("amtool")
