"""Fixtures: the embedded cluster over real HTTP, and the reactor assembled against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import freezegun
import pytest

from reactor_sim import SimCluster
from tests.support import HERE, TOKEN, Reactor, serving

# The official client validates calls with pydantic, which cannot build a schema for freezegun's
# FakeDatetime: freezegun must leave those libraries' modules alone (the reactor still sees the fake clock).
freezegun.configure(extend_ignore_list=["kubernetes", "pydantic", "pydantic_core", "urllib3"])


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster().start()
    cluster.load_manifests((HERE / "fixtures" / "cluster.yaml").read_text())
    cluster.settle()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    with serving(sim, token_file) as r:
        yield r


# Test tiers (pyproject markers): `make test-fast` runs unit and component on every core; `make test` and CI run
# every tier. A module names its tier on itself (`pytestmark = pytest.mark.unit`, or `process`); one that names
# none takes its folder's, and a folder not listed here is component. A test's own tier marker adds to its module's.
TIERS = ("unit", "component", "process")
TIER_OF_FOLDER = {
    "policy": "unit", "samples": "unit",
    "deploy": "process", "docs": "process", "e2e": "process", "reliability": "process", "bench": "process",
    "rules": "process", "promstack": "promstack", "report": "promstack",
}
# Tests that assert a wall-clock time: told apart so a loaded machine's failure is read as what it is.
WALLCLOCK = {
    "test_one_notification_of_ten_thousand_alerts", "test_a_write_that_hangs_once_is_retried_and_applied_once",
    "test_retry_after_is_waited_for", "test_retries_go_through_the_client_rate_limit",
    "test_a_client_trickling_its_head_is_dropped_after_the_read_timeout",
    "test_a_client_trickling_its_body_gets_a_408_after_the_read_timeout",
    "test_healthz_stays_quick_while_50_slow_clients_trickle", "test_a_client_trickling_its_tls_handshake_is_dropped",
    "test_a_run_stops_at_its_duration", "test_a_stalled_event_api_does_not_delay_the_webhooks_answer",
    "test_the_queue_is_bounded_and_a_full_one_drops_without_waiting",
    "test_a_slow_answer_past_the_timeout_is_a_timeout",
    "test_a_trickled_answer_cannot_outlast_the_timeout_of_the_whole_call",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        if not module_tier(item):
            folder = item.path.relative_to(tests).parts[0]
            item.add_marker(getattr(pytest.mark, TIER_OF_FOLDER.get(folder, "component")))
        if item.originalname in WALLCLOCK:
            item.add_marker(pytest.mark.wallclock)


def module_tier(item: pytest.Item) -> str | None:
    """The tier the test's module names in its `pytestmark`, if it names one."""
    marks = getattr(getattr(item, "module", None), "pytestmark", [])
    names = {mark.name for mark in (marks if isinstance(marks, list) else [marks])}
    return next((tier for tier in TIERS if tier in names), None)
