"""Fixtures of the reliability suite, and the figures table printed at the end of the session.

`RELIABILITY_LONG=1` turns on the long forms (the storm minute, the big fuzz); without it they
are skipped with a visible reason, and the short forms run inside `make test`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import Child

LONG = os.environ.get("RELIABILITY_LONG") == "1"
REPO = Path(__file__).resolve().parents[2]
LAST_RUN = REPO / "reliability" / "last-run.json"

long_only = pytest.mark.skipif(not LONG, reason="long form: run with RELIABILITY_LONG=1 (make reliability)")


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """An empty embedded cluster (scenarios seed their own namespaces)."""
    with SimCluster().start() as sim:
        yield sim


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    """Start `reactor serve` children; every one is killed at teardown, whatever the test did."""
    children: list[Child] = []

    def start(sim: SimCluster, **kw: Any) -> Child:
        kw.setdefault("name", f"reactor-{len(children)}")
        child = Child(sim, tmp_path / "children", **kw)
        children.append(child)
        return child.start()

    try:
        yield start
    finally:
        for child in children:
            child.kill()
            if child.log_path.exists():
                print(f"--- {child.name} log (tail) ---\n{child.log_tail()}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not FIGURES.rows:
        return
    terminalreporter.section("reliability figures" + (" (long form)" if LONG else " (short form)"))
    terminalreporter.write_line(FIGURES.table())
    for name, value in sorted(FIGURES.notes.items()):
        terminalreporter.write_line(f"{name}: {value}")
    broken = FIGURES.verdict()
    terminalreporter.write_line("promises kept: no double action, no alert lost, no 5xx on bad input"
                                if not broken else "PROMISES BROKEN: " + "; ".join(broken))
    try:
        FIGURES.write(LAST_RUN)
        terminalreporter.write_line(f"written to {LAST_RUN.relative_to(REPO)}")
    except OSError as e:
        terminalreporter.write_line(f"could not write {LAST_RUN}: {e}")
