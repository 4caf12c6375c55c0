"""GPU-hours: the hold computed from the sealed `original` against the current template, and the ledger's
gauges and GPU-seconds over an isolated registry (issue 14: the FinOps view)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest
from prometheus_client import CollectorRegistry

from reactor.finops import GpuLedger, held_gpus
from reactor.metrics import Metrics
from reactor.model import Container, ReactorState, Workload, WorkloadRef

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _workload(name: str, gpus: int, replicas: int | None, original: dict[str, object]) -> Workload:
    state = ReactorState(original=MappingProxyType(original))
    return Workload(WorkloadRef("Deployment", "team-a", name), "1", (Container("main", gpus), Container("side", 0)),
                    replicas=replicas, state=state)


@pytest.mark.parametrize(("gpus", "replicas", "original", "held"), [
    (2, 3, {"gpus": MappingProxyType({"main": 4})}, 6),  # shrunk 4 → 2 GPUs on 3 pods: 6 released
    (3, 1, {"gpus": MappingProxyType({"main": 2})}, -1),  # grown 2 → 3 on one pod: 1 added
    (2, 1, {"replicas": 3}, 4),  # scaled 3 → 1 at 2 GPUs a pod
    (2, 2, {}, 0),  # nothing recorded: nothing held
    (2, None, {"gpus": MappingProxyType({"main": 4})}, 2),  # a CronJob: one pod a run
    (2, 1, {"gpus": MappingProxyType({"gone": 8})}, 0),  # a container no longer in the template counts nothing
], ids=["shrink", "grow", "scale-down", "untouched", "cronjob", "unknown-container"])
def test_held_gpus(gpus: int, replicas: int | None, original: dict[str, object], held: int) -> None:
    assert held_gpus(_workload("w", gpus, replicas, original)) == held


def test_the_ledger_sets_gauges_per_namespace_and_integrates_released_gpus() -> None:
    registry = CollectorRegistry()
    ledger = GpuLedger(Metrics(registry))
    ledger.observe(_workload("a", 2, 3, {"gpus": MappingProxyType({"main": 4})}))
    ledger.observe(_workload("b", 3, 1, {"gpus": MappingProxyType({"main": 2})}))
    ledger.publish(T0)
    ledger.publish(T0 + timedelta(minutes=10))
    value = lambda name: registry.get_sample_value(name, {"namespace": "team-a"})  # noqa: E731
    assert (value("reactor_gpus_released"), value("reactor_gpus_added")) == (6, 1)
    assert value("reactor_gpu_seconds_saved_total") == 6 * 600
