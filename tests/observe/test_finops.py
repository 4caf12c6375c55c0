"""GPU-hours: the hold computed from the sealed `original` against the current template, and the ledger's
gauges and GPU-seconds over an isolated registry (issue 14: the FinOps view). The hold follows the workload's
truth (issue 26): it ends when the workload is changed by anyone else, reverted, deleted, or leaves the allowed
namespaces."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

import pytest
from prometheus_client import CollectorRegistry

from reactor.config.settings import load_settings
from reactor.core.errors import ConfigError
from reactor.core.metrics import Metrics
from reactor.core.model import Container, LastAction, ReactorState, Verification, Workload, WorkloadRef
from reactor.observe.finops import GpuHours, held_gpus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _workload(name: str, gpus: int, replicas: int | None, original: dict[str, object], *,
              last: LastAction | None = None, uid: str = "uid-1", namespace: str = "team-a",
              verification: Verification | None = None) -> Workload:
    """A workload as the verifier reads it after the reactor's change: `last` defaults to the GPU resize (or the
    scale) that left it at `gpus` (`replicas`)."""
    if last is None and "replicas" in original:
        last = _last("scale-replicas", None, replicas)
    elif last is None:
        last = _last("resize-gpu", "main", gpus)
    state = ReactorState(original=MappingProxyType(original), last_action=last, verification=verification)
    return Workload(WorkloadRef("Deployment", namespace, name), "1", (Container("main", gpus), Container("side", 0)),
                    replicas=replicas, state=state, uid=uid)


def _last(action: str, container: str | None, to: int | str | None, *, at: datetime = T0) -> LastAction:
    direction = "revert" if action == "revert" else "down"
    return LastAction(action, direction, container, None, to, "fp", "2026-03-01T11:00:00Z", at)


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
    ledger = GpuHours(Metrics(registry))
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
    ledger = GpuHours(Metrics(registry), {"nvidia.com/gpu": 2.5, "amd.com/gpu": 1.0}, "nvidia.com/gpu")
    ledger.observe(_workload("a", 2, 3, {"gpus": MappingProxyType({"main": 4})}))
    ledger.publish(T0)
    ledger.publish(T0 + timedelta(minutes=10))
    assert registry.get_sample_value("reactor_gpu_cost_saved_total", {"namespace": "team-a"}) == pytest.approx(2.5)
    assert registry.get_sample_value("reactor_gpu_hourly_cost", {"resource": "nvidia.com/gpu"}) == 2.5
    assert registry.get_sample_value("reactor_gpu_hourly_cost", {"resource": "amd.com/gpu"}) == 1.0


def test_without_a_price_no_cost_is_counted() -> None:
    registry = CollectorRegistry()
    ledger = GpuHours(Metrics(registry), {"amd.com/gpu": 1.0}, "nvidia.com/gpu")
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


# --- the hold follows the workload's truth (issue 26) ------------------------------------------------------

SHRUNK = {"gpus": MappingProxyType({"main": 4})}  # 4 → 2 GPUs on 3 pods: 6 held back


def _ledger(allowed: set[str] | None = None) -> tuple[GpuHours, CollectorRegistry]:
    registry = CollectorRegistry()
    namespaces = allowed if allowed is not None else {"team-a"}
    return GpuHours(Metrics(registry), allowed=lambda ns: ns in namespaces), registry


def _saved_over_ten_minutes(ledger: GpuHours, registry: CollectorRegistry) -> tuple[float, float]:
    """(reactor_gpus_released now, GPU-seconds counted over the next ten minutes)."""
    before = registry.get_sample_value("reactor_gpu_seconds_saved_total", {"namespace": "team-a"}) or 0.0
    ledger.publish(T0 + timedelta(hours=1))
    ledger.publish(T0 + timedelta(hours=1, minutes=10))
    after = registry.get_sample_value("reactor_gpu_seconds_saved_total", {"namespace": "team-a"}) or 0.0
    return registry.get_sample_value("reactor_gpus_released", {"namespace": "team-a"}) or 0.0, after - before


def test_a_hold_that_stands_keeps_counting_after_verification() -> None:
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    verified = _workload("a", 2, 3, SHRUNK, verification=Verification("verified", "resize-gpu-down", T0))
    ledger.follow(verified.ref, verified)  # verified, untouched since: the hold stands
    assert _saved_over_ten_minutes(ledger, registry) == (6, 6 * 600)


@pytest.mark.parametrize("changed", [
    _workload("a", 3, 3, SHRUNK),  # a person set the GPUs to 3
    _workload("a", 2, 5, SHRUNK),  # a person (or an HPA) scaled it to 5 replicas
    _workload("a", 4, 3, SHRUNK, last=_last("resize-gpu", "main", 2)),  # set back by hand, record left behind
], ids=["gpus-edited", "replicas-edited", "set-back-by-hand"])
def test_a_hold_ends_when_someone_else_changes_the_workload(changed: Workload,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reactor.observe.finops")
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    ledger.follow(changed.ref, changed)
    assert ledger.held() == []
    assert _saved_over_ten_minutes(ledger, registry) == (0, 0)
    assert "GPU hold ended" in caplog.text


def test_a_hold_ends_when_the_change_is_reverted() -> None:
    """The revert restores 4 GPUs and takes `gpus` off the record: nothing is held back any more."""
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    reverted = _workload("a", 4, 3, {}, last=_last("revert", "main", 4, at=T0 + timedelta(minutes=30)),
                         verification=Verification("reverted", "resize-gpu-down", T0 + timedelta(minutes=30)))
    ledger.follow(reverted.ref, reverted)
    assert ledger.held() == []
    assert _saved_over_ten_minutes(ledger, registry) == (0, 0)


def test_a_revert_of_a_later_change_keeps_an_earlier_shrink_on_record() -> None:
    """set-priority-up reverted: the shrink before it still holds its GPUs back (the record keeps `gpus`)."""
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    later = _workload("a", 2, 3, SHRUNK, last=_last("revert", None, "medium", at=T0 + timedelta(minutes=30)))
    ledger.follow(later.ref, later)
    assert _saved_over_ten_minutes(ledger, registry) == (6, 6 * 600)


def test_a_hold_ends_when_the_workload_is_deleted_or_created_again() -> None:
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    ledger.observe(_workload("b", 2, 3, SHRUNK))
    ledger.follow(WorkloadRef("Deployment", "team-a", "a"), None)  # deleted
    again = _workload("b", 2, 3, SHRUNK, uid="uid-2")  # deleted, and a new one of the same name made
    ledger.follow(again.ref, again)
    assert ledger.held() == []
    assert _saved_over_ten_minutes(ledger, registry) == (0, 0)


def test_a_hold_ends_when_its_namespace_is_no_longer_allowed() -> None:
    """The allow list changed under it (or the Lease's list names a namespace this replica's policy denies)."""
    allowed = {"team-a"}
    ledger, registry = _ledger(allowed)
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    ledger.observe(_workload("x", 2, 3, SHRUNK, namespace="team-x"))  # never allowed: never held
    assert ledger.held() == [WorkloadRef("Deployment", "team-a", "a")]
    allowed.clear()
    workload = _workload("a", 2, 3, SHRUNK)
    ledger.follow(workload.ref, workload)
    assert ledger.held() == []
    assert _saved_over_ten_minutes(ledger, registry) == (0, 0)


def test_a_newer_change_of_the_reactor_restarts_the_hold_from_it() -> None:
    """2 → 1 GPU by the reactor, an hour later: 9 held back from then on, not "changed by someone else"."""
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    again = _workload("a", 1, 3, SHRUNK, last=_last("resize-gpu", "main", 1, at=T0 + timedelta(hours=1)))
    ledger.follow(again.ref, again)
    assert _saved_over_ten_minutes(ledger, registry) == (9, 9 * 600)


def test_only_the_leader_counts() -> None:
    """A replica that lost the verifier Lease forgets its holds: the one that leads counts from then on."""
    ledger, registry = _ledger()
    ledger.observe(_workload("a", 2, 3, SHRUNK))
    ledger.clear()
    assert _saved_over_ten_minutes(ledger, registry) == (0, 0)
