"""Fixtures for the bench's own tests: a small bench cluster (50 one-pod Deployments, 3 latency ones)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.scenario import build_cluster, start_sim
from reactor_sim import SimCluster


@pytest.fixture(scope="module")
def small_sim() -> Iterator[SimCluster]:
    sim = start_sim()
    try:
        build_cluster(sim, replicas=1, latency_workloads=3)
        yield sim
    finally:
        sim.stop()
