"""GPU-hours: what the reactor's changes hold back or add now, per namespace, and only while they still stand.

A hold starts when the verifier reads a workload carrying the reactor's change (its sealed `original` against its
current GPUs: positive is released, negative is added, GPUs per pod × replicas). It lasts while the workload is
as the reactor left it, which the verifier re-reads each pass (from the watch cache when it holds the workload,
else one GET per held workload), and it ends when the workload is

- changed by anyone else: its GPUs per container or its replicas are no longer what the reactor's change left
  (nor the value its last GPU or replica change wrote);
- reverted (by the verifier or on the alert's resolve: the revert takes the dimension off the recorded
  `original`), or its recorded state removed or no longer authentic;
- deleted (or deleted and created again: another uid);
- outside the allowed namespaces (the policy's allow/deny, as this replica has it).

A newer change of the reactor's on the same workload starts the hold again from that change. Released GPUs
integrated over time give `reactor_gpu_seconds_saved_total` (and, priced by `finops.gpuHourlyCost`,
`reactor_gpu_cost_saved_total`); the gauges `reactor_gpus_released` / `reactor_gpus_added` are read from the
holds at scrape time. Kept by the replica that leads the verifier Lease only (so replicas never count twice),
in memory: a restart, or a lost Lease, starts from nothing. It reads nothing itself and writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from reactor.core.metrics import Metrics
from reactor.core.model import Workload, WorkloadRef
from reactor.observe.metrics import ObserveMetrics
from reactor.state.annotations import GPUS, REPLICAS

log = logging.getLogger(__name__)

Shape = tuple[tuple[tuple[str, int], ...], int | None]  # (container, GPUs) of the template, and the replicas


def held_gpus(workload: Workload) -> int:
    """GPUs the reactor's recorded changes hold back (> 0) or add (< 0) on this workload now."""
    original = workload.state.original
    replicas = workload.replicas if workload.replicas is not None else 1
    now_per_pod = sum(c.gpus for c in workload.containers)
    before_per_pod = now_per_pod
    recorded = original.get(GPUS)
    if isinstance(recorded, Mapping):
        for name, gpus in recorded.items():
            part, _, bare = name.rpartition("/")  # `<part>/<container>` in a resource with several templates
            container = workload.container(bare) if part == workload.part else None
            if container is not None and isinstance(gpus, int):
                before_per_pod += gpus - container.gpus
    before_replicas = original.get(REPLICAS, replicas)
    if not isinstance(before_replicas, int):
        before_replicas = replicas
    return before_per_pod * before_replicas - now_per_pod * replicas


def shape(workload: Workload) -> Shape:
    """What a hold is computed from: each container's GPUs and the replicas."""
    return tuple((c.name, c.gpus) for c in workload.containers), workload.replicas


@dataclass(frozen=True, slots=True)
class Hold:
    """One workload's hold, and what it was computed from: the object (uid), the reactor's change it comes from
    (the time of its `last-action`) and the shape that change left."""

    gpus: int
    uid: str
    since_action: datetime
    shape: Shape


class GpuHours:
    """The holds of the workloads the reactor's changes still shape; released GPUs integrated into seconds."""

    def __init__(self, metrics: Metrics, hourly_cost: Mapping[str, float] | None = None,
                 resource: str = "nvidia.com/gpu", *, allowed: Callable[[str], bool] = lambda namespace: True) -> None:
        self.counts = counts = ObserveMetrics.of(metrics)  # observe/metrics.py
        prices = hourly_cost or {}
        for name, price in prices.items():  # published as configured, for dashboards that price other series
            counts.gpu_hourly_cost.labels(resource=name).set(price)
        self._price_per_second = prices[resource] / 3600 if resource in prices else None
        self._allowed = allowed
        self._holds: dict[WorkloadRef, Hold] = {}
        self._namespaces: set[str] = set()  # every namespace that held GPUs: its gauges read 0 once they end
        self._since: datetime | None = None
        self._lock = threading.Lock()
        counts.gpus_released.read_from(lambda: self._totals(released=True))
        counts.gpus_added.read_from(lambda: self._totals(released=False))

    # --- what the verifier tells it ---------------------------------------------------------------------

    def observe(self, workload: Workload) -> None:
        """The verifier read `workload` while following the reactor's change: its hold (re)starts from it."""
        why = _no_hold(workload, self._allowed)
        held = 0 if why else held_gpus(workload)
        last = workload.state.last_action
        with self._lock:
            if why or not held or last is None:
                reverted = last is not None and last.action == "revert"
                self._end(workload.ref, why or ("reverted" if reverted else "holds no GPUs"))
                return
            self._holds[workload.ref] = Hold(held, workload.uid, last.time, shape(workload))
            self._namespaces.add(workload.ref.namespace)

    def follow(self, ref: WorkloadRef, workload: Workload | None) -> None:
        """A later read of a held workload (None: it does not exist): the hold stays only while it still stands."""
        with self._lock:
            hold = self._holds.get(ref)
        if hold is None:
            return
        why: str | None
        if workload is None or workload.uid != hold.uid:
            why = "deleted" if workload is None else "deleted and created again"
        else:
            why = _no_hold(workload, self._allowed)
        if why is None and workload is not None:
            last = workload.state.last_action
            if last is not None and last.time != hold.since_action:
                self.observe(workload)  # the reactor changed it again: the hold is that change's now
                return
            if shape(workload) != hold.shape:
                why = "changed by someone else (GPUs or replicas are not what the reactor's change left)"
        if why is not None:
            with self._lock:
                self._end(ref, why)

    def end(self, ref: WorkloadRef, why: str) -> None:
        with self._lock:
            self._end(ref, why)

    def held(self) -> list[WorkloadRef]:
        """The workloads holding GPUs now, to be read again."""
        with self._lock:
            return sorted(self._holds)

    def clear(self) -> None:
        """This replica no longer leads the verifier Lease: the replica that does counts from now on."""
        with self._lock:
            self._holds.clear()
            self._namespaces.clear()
            self._since = None

    def _end(self, ref: WorkloadRef, why: str) -> None:
        hold = self._holds.pop(ref, None)
        if hold is not None:
            log.info("GPU hold ended", extra={"workload": str(ref), "gpus": hold.gpus, "reason": why})

    # --- what it publishes -------------------------------------------------------------------------------

    def publish(self, now: datetime) -> None:
        """Count the seconds since the last publish at the holds known now."""
        with self._lock:
            released: dict[str, int] = defaultdict(int)
            for ref, hold in self._holds.items():
                released[ref.namespace] += max(0, hold.gpus)
            elapsed = 0.0 if self._since is None else max(0.0, (now - self._since).total_seconds())
            self._since = now
        if not elapsed:
            return
        for namespace, gpus in released.items():
            if gpus:
                seconds = gpus * elapsed
                self.counts.gpu_seconds_saved.labels(namespace=namespace).inc(seconds)
                if self._price_per_second is not None:
                    self.counts.gpu_cost_saved.labels(namespace=namespace).inc(seconds * self._price_per_second)

    def _totals(self, *, released: bool) -> dict[tuple[str, ...], float]:
        """Per namespace, the GPUs held back (released) or added, for the scrape-time gauges."""
        with self._lock:
            totals: dict[tuple[str, ...], float] = {(namespace,): 0.0 for namespace in self._namespaces}
            for ref, hold in self._holds.items():
                totals[(ref.namespace,)] += max(0, hold.gpus if released else -hold.gpus)
        return dict(totals)


def _no_hold(workload: Workload, allowed: Callable[[str], bool]) -> str | None:
    """Why this read of the workload carries no hold of the reactor's, or None."""
    if not allowed(workload.ref.namespace):
        return f"namespace {workload.ref.namespace} is not allowed"
    last = workload.state.last_action
    if last is None:
        return "no change of the reactor's on record (or its record is not authentic)"
    if last.action == "resize-gpu":
        container = workload.container(last.container)
        now: object = None if container is None else container.gpus
    elif last.action == "scale-replicas":
        now = workload.replicas
    else:
        return None
    if now != last.to_value:
        return f"changed by someone else ({last.action} wrote {last.to_value!r}, the workload has {now!r})"
    return None
