"""The promises of issue 35 as reliability figures: what the reactor owes is paid after a restart, once; a growth
another full quota refuses takes no donor's GPUs; a state Lease another team pre-created or edited never stops the
reactor. Each scenario is the HTTP test that pins it (named below), run here once more and counted: a broken
promise is a figure that must be 0, and fails the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.engine.test_rebalance_flow import cluster  # noqa: F401 - the seed's quota and nodes, a pytest fixture
from tests.engine.test_rebalance_flow import (
    test_a_restart_between_the_receivers_resolve_and_the_donors_restore_still_restores_it as restore_after_restart,
)
from tests.engine.test_rebalance_flow import test_a_second_full_quota_leaves_the_donor_untouched as second_full_quota
from tests.reliability.figures import FIGURES
from tests.support import Reactor
from tests.trust.conftest import reactor_objects, sim  # noqa: F401 - the deployed cluster (RBAC), pytest fixtures
from tests.trust.test_state_home import isvc, reactor, team_c  # noqa: F401 - pytest fixtures of that scenario
from tests.trust.test_state_home import test_a_lease_edited_by_another_team_does_not_block_the_revert as edited
from tests.trust.test_state_home import test_a_lease_precreated_by_another_team_is_no_record as precreated


def _kept(scenario: Any, *args: Any) -> bool:
    """Whether the scenario's own assertions hold (its failure is counted, then raised by the figure's check)."""
    try:
        scenario(*args)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("watch_cache", [True, False], ids=["watch-cache", "no-watch-cache"])
def test_a_give_back_owed_across_a_restart_is_paid_once(cluster: SimCluster, token_file: Path,  # noqa: F811
                                                         watch_cache: bool) -> None:
    kept = _kept(restore_after_restart, cluster, token_file, watch_cache)
    FIGURES.count_trust(owed_tried=1, owed_unpaid=0 if kept else 1)
    FIGURES.add("promises", deliveries=2, applied=int(kept), expected=1)
    assert kept


def test_a_growth_another_quota_refuses_takes_nothing(cluster: SimCluster, token_file: Path) -> None:  # noqa: F811
    kept = _kept(second_full_quota, cluster, token_file)
    FIGURES.count_trust(refused_growth_tried=1, refused_growth_gave=0 if kept else 1)
    FIGURES.add("promises", deliveries=1, applied=0, expected=0)
    assert kept


@pytest.mark.parametrize("scenario", [precreated, edited], ids=["pre-created", "edited"])
def test_a_state_lease_another_team_wrote_never_stops_the_reactor(
        reactor: Reactor, sim: SimCluster, isvc: dict[str, Any],  # noqa: F811
        team_c: k8s.CoordinationV1Api,  # noqa: F811
        scenario: Any) -> None:
    kept = _kept(scenario, reactor, sim, isvc, team_c)
    FIGURES.count_trust(state_leases_tried=1, state_leases_blocking=0 if kept else 1)
    assert kept
