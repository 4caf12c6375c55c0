"""A reactor whose policy fits the adapter tests: no cooldown or revert hold, so one test walks a whole cycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor_sim import SimCluster
from tests.support import Reactor, build_reactor, make_settings

POLICY = {"cooldown": "0s", "reverseAfter": "0s", "revertAfter": "0s",
          "revert": ["resize-gpu-up", "scale-replicas-up", "set-priority-up"],
          "alerts": {"GPUUnderutilized": ["resize-gpu-down"], "GPUIdle": ["scale-replicas-down"],
                     "GPUSaturated": ["set-priority-up"], "GPUMemorySaturated": ["resize-gpu-up"],
                     "GPUMetricsMissing": ["hold"]}}


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, make_settings(token_file, **POLICY))
    try:
        yield r
    finally:
        r.service.kube.close()
