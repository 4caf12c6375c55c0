"""A reactor whose policy fits the adapter tests: no cooldown or revert hold, so one test walks a whole cycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor_sim import SimCluster
from tests.support import Reactor, serving

POLICY = {"cooldown": "0s", "reverseAfter": "0s", "revertAfter": "0s",
          "revert": ["resize-gpu-up", "scale-replicas-up", "set-priority-up"],
          "alerts": {"GPUUnderutilized": ["resize-gpu-down"], "GPUIdle": ["scale-replicas-down"],
                     "GPUSaturated": ["set-priority-up"], "GPUMemorySaturated": ["resize-gpu-up"],
                     "GPUMetricsMissing": ["hold"]}}


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    with serving(sim, token_file, **POLICY) as r:
        yield r


@pytest.fixture
def kueue_reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    """The same, its priority ladder Kueue's WorkloadPriorityClasses wpc-low → wpc-high (the Kueue cases' own)."""
    with serving(sim, token_file, **{**POLICY, "priorityLadder": ["wpc-low", "wpc-high"]}) as r:
        yield r
