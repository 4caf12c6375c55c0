"""bench/sim_scale.py: the embedded cluster's settle row (built, settled and checked at a small size here)."""

from __future__ import annotations

import pytest

from bench.report import _sim_settle
from bench.sim_scale import manifests, measure


def test_a_small_scale_run_settles_every_pod_and_its_quotas_equal_the_recount() -> None:
    row = measure(pods=200, deployments=10, namespaces=5)
    assert row["running"] == 200 and row["quotas_match_recount"] is True
    assert row["pods"] == 200 and row["deployments"] == 10 and len(row["load_average_1m"]) == 2


def test_the_sizes_must_divide_evenly() -> None:
    with pytest.raises(ValueError, match="divide"):
        manifests(pods=1000, deployments=30, namespaces=5)


def test_the_row_says_whether_the_30_s_target_is_met() -> None:
    row = {"pods": 10000, "deployments": 100, "namespaces": 5, "running": 10000, "quotas_match_recount": True,
           "load_average_1m": [7.5, 7.1], "cpus": 2}
    assert "settle ≤ 30 s: met" in "\n".join(_sim_settle({**row, "settle_s": 29.5}))
    assert "settle ≤ 30 s: MISSED" in "\n".join(_sim_settle({**row, "settle_s": 31.0}))
