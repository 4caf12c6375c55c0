"""The report's values: what one workload did over the window and what the reactor would have done about it.

Pure data. `render_*` turn a `Report` into text, JSON (schema.json) or HTML; nothing here formats.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reactor.core.model import Shortfall, WorkloadRef
from reactor.tools.report.mig import Fit


class Grouping(enum.StrEnum):
    """How pods were grouped into workloads."""

    OWNER_SERIES = "kube-state-metrics"  # kube_pod_owner / kube_replicaset_owner / kube_job_owner
    KUBECONFIG = "kubeconfig"  # the pods' ownerReferences, read from the cluster (--kubeconfig), where no owner series
    POD_NAME = "pod-name"  # the controllers' naming conventions, where neither tells

    @property
    def certainty(self) -> int:
        """A workload whose pods were grouped several ways is as certain as its least certain pod."""
        return {Grouping.POD_NAME: 0, Grouping.KUBECONFIG: 1, Grouping.OWNER_SERIES: 2}[self]


class WorkloadKey(WorkloadRef):
    """The reactor's `WorkloadRef` as the report names it (`namespace/kind/name`: the table, the JSON's `receiver`
    and `donor`) and orders it: by namespace first, so a namespace's workloads stay together."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    @staticmethod
    def _order(key: WorkloadRef) -> tuple[str, str, str]:
        return key.namespace, key.kind, key.name

    def __lt__(self, other: WorkloadRef) -> bool:
        return self._order(self) < self._order(other)

    def __le__(self, other: WorkloadRef) -> bool:
        return self._order(self) <= self._order(other)

    def __gt__(self, other: WorkloadRef) -> bool:
        return self._order(self) > self._order(other)

    def __ge__(self, other: WorkloadRef) -> bool:
        return self._order(self) >= self._order(other)


@dataclass(frozen=True, slots=True)
class Episode:
    """One would-be alert: pending from `active_at`, firing `fired_at` → `resolved_at` (None: at the end)."""

    alert: str
    pod: str
    container: str
    active_at: datetime
    fired_at: datetime
    resolved_at: datetime | None
    value: float


@dataclass(frozen=True, slots=True)
class Decision:
    """What `decide` answered to one notification: an action ("resize-gpu" …) or a skip reason."""

    at: datetime
    alert: str
    status: str
    action: str | None
    strategy: str | None
    from_value: int | str | None
    to_value: int | str | None
    gpu_delta: int
    reason: str | None
    detail: str
    # The notification's alerts in Alertmanager's webhook shape: `reactor plan` can be asked about the same ones.
    alerts: tuple[Mapping[str, object], ...] = ()
    shortfall: Shortfall | None = None  # a growth refused for a GPU quota: which quota, how many GPUs short


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float | None
    p95: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class Timeline:
    """Per evaluation time (unix seconds): GPUs held, utilization (NaN: unknown), and the GPUs it would have held
    with the would-be changes (`with_changes`, empty until the replay ran). Arrays of doubles: a week of a thousand
    workloads is millions of points, which Python floats would hold at four times the memory."""

    times: Sequence[float]
    gpus: Sequence[float]
    utilization: Sequence[float]
    with_changes: Sequence[float] = ()


@dataclass(frozen=True, slots=True)
class WorkloadReport:
    key: WorkloadKey
    grouping: Grouping
    pods: tuple[str, ...]
    gpu_hours: float
    gpus_max: int
    utilization: Percentiles
    memory: Percentiles  # framebuffer used / total, of the fullest GPU
    hours: dict[str, float]  # "idle" | "underutilized" | "saturated" | "memory-saturated" | "metrics-missing"
    episodes: tuple[Episode, ...]
    decisions: tuple[Decision, ...]
    gpu_hours_released: float
    gpu_hours_added: float
    mig: Fit | None
    timeline: Timeline


@dataclass(frozen=True, slots=True)
class Trade:
    """A rebalancing opportunity: `receiver`'s growth refused for a full quota while `donor`, in the same
    namespace, had a donor alert firing, for `hours`."""

    namespace: str
    quota: str
    receiver: WorkloadKey
    donor: WorkloadKey
    start: datetime
    end: datetime
    hours: float
    gpus_short: int


@dataclass(frozen=True, slots=True)
class Report:
    since: datetime
    until: datetime
    step_seconds: float
    prometheus: str
    workloads: tuple[WorkloadReport, ...]
    trades: tuple[Trade, ...]
    notes: tuple[str, ...]
