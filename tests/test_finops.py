"""GPU-hours: the hold computed from the sealed `original` against the current template, and the ledger's
gauges and GPU-seconds over an isolated registry (issue 14: the FinOps view)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

import pytest
from prometheus_client import CollectorRegistry

from reactor.config.settings import load_settings
from reactor.core.errors import ConfigError
from reactor.core.metrics import Metrics
from reactor.core.model import Container, ReactorState, Workload, WorkloadRef
from reactor.observe.finops import GpuLedger, held_gpus

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


def test_a_priced_gpu_resource_counts_the_cost_of_the_gpu_hours_held_back() -> None:
    """finops.gpuHourlyCost {nvidia.com/gpu: 2.5}: 6 GPUs held back for 10 minutes cost 6 × 2.5 / 6 = 2.5; every
    configured price is published, a price for another resource counts nothing here."""
    registry = CollectorRegistry()
    ledger = GpuLedger(Metrics(registry), {"nvidia.com/gpu": 2.5, "amd.com/gpu": 1.0}, "nvidia.com/gpu")
    ledger.observe(_workload("a", 2, 3, {"gpus": MappingProxyType({"main": 4})}))
    ledger.publish(T0)
    ledger.publish(T0 + timedelta(minutes=10))
    assert registry.get_sample_value("reactor_gpu_cost_saved_total", {"namespace": "team-a"}) == pytest.approx(2.5)
    assert registry.get_sample_value("reactor_gpu_hourly_cost", {"resource": "nvidia.com/gpu"}) == 2.5
    assert registry.get_sample_value("reactor_gpu_hourly_cost", {"resource": "amd.com/gpu"}) == 1.0


def test_without_a_price_no_cost_is_counted() -> None:
    registry = CollectorRegistry()
    ledger = GpuLedger(Metrics(registry), {"amd.com/gpu": 1.0}, "nvidia.com/gpu")
    ledger.observe(_workload("a", 2, 3, {"gpus": MappingProxyType({"main": 4})}))
    ledger.publish(T0)
    ledger.publish(T0 + timedelta(minutes=10))
    assert registry.get_sample_value("reactor_gpu_seconds_saved_total", {"namespace": "team-a"}) == 6 * 600
    assert registry.get_sample_value("reactor_gpu_cost_saved_total", {"namespace": "team-a"}) is None


@pytest.mark.parametrize(("raw", "problem"), [
    ("finops: {gpuHourlyCost: 2.5}\n", "finops.gpuHourlyCost: expected a mapping of GPU resource"),
    ("finops: {gpuHourlyCost: {nvidia.com/gpu: -1}}\n", "finops.gpuHourlyCost.nvidia.com/gpu: must be between 0"),
    ("finops: {gpuHourlyCost: {nvidia.com/gpu: cheap}}\n", "finops.gpuHourlyCost.nvidia.com/gpu: expected a number"),
    ("finops: {gpuHourlyCost: {'not a resource': 1}}\n", "expected an extended resource name"),
], ids=["not-a-mapping", "negative", "not-a-number", "bad-resource"])
def test_a_bad_price_is_a_configuration_error_naming_the_key(tmp_path: Path, raw: str, problem: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(raw)
    with pytest.raises(ConfigError) as e:
        load_settings(str(path))
    assert problem in str(e.value)


def test_the_price_is_read_from_the_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("finops: {gpuHourlyCost: {nvidia.com/gpu: 2.5}}\n")
    assert dict(load_settings(str(path)).policy.gpu_hourly_cost) == {"nvidia.com/gpu": 2.5}
