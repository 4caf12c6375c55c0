"""GPU-hours: what the reactor's changes currently hold back or add, per namespace.

For each workload the verifier reads, the GPUs of its recorded `original` (per pod × replicas) against
its current ones: positive is released, negative is added. Released GPUs integrated over time give
`reactor_gpu_seconds_saved_total`, and, when `finops.gpuHourlyCost` prices the GPU resource, their cost
`reactor_gpu_cost_saved_total` (in the currency the price is given in). Only workloads read while being
verified (and re-read after a revert) are known: a value is the last one seen, kept until the workload is
read again, and lost on restart. It reads nothing itself and writes nothing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from reactor.core.metrics import Metrics
from reactor.core.model import Workload, WorkloadRef
from reactor.state.annotations import GPUS, REPLICAS


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


class GpuLedger:
    """The last known hold of each workload, published as gauges; released GPUs integrated into seconds."""

    def __init__(self, metrics: Metrics, hourly_cost: Mapping[str, float] | None = None,
                 resource: str = "nvidia.com/gpu") -> None:
        self.metrics = metrics
        prices = hourly_cost or {}
        for name, price in prices.items():  # published as configured, for dashboards that price other series
            metrics.gpu_hourly_cost.labels(resource=name).set(price)
        self._price_per_second = prices[resource] / 3600 if resource in prices else None
        self._held: dict[WorkloadRef, int] = {}
        self._since: datetime | None = None
        self._lock = threading.Lock()

    def observe(self, workload: Workload) -> None:
        with self._lock:
            self._held[workload.ref] = held_gpus(workload)

    def publish(self, now: datetime) -> None:
        """Count the seconds since the last publish at the hold known then, then set the gauges."""
        with self._lock:
            released: dict[str, int] = defaultdict(int)
            added: dict[str, int] = defaultdict(int)
            for ref, held in self._held.items():
                released[ref.namespace] += max(0, held)
                added[ref.namespace] += max(0, -held)
            elapsed = 0.0 if self._since is None else max(0.0, (now - self._since).total_seconds())
            self._since = now
        for namespace in set(released) | set(added):
            self.metrics.gpus_released.labels(namespace=namespace).set(released[namespace])
            self.metrics.gpus_added.labels(namespace=namespace).set(added[namespace])
            if released[namespace] and elapsed:
                seconds = released[namespace] * elapsed
                self.metrics.gpu_seconds_saved.labels(namespace=namespace).inc(seconds)
                if self._price_per_second is not None:
                    self.metrics.gpu_cost_saved.labels(namespace=namespace).inc(seconds * self._price_per_second)
