"""A fake cAdvisor (the kubelet's /metrics/cadvisor) for the end-to-end tests: CFS counters per container.

cAdvisor's names and labels (`namespace`, `pod`, `container`, `id`, `image`, `name`): the counters
`container_cpu_cfs_periods_total` (10 CFS periods of 100 ms a second) and
`container_cpu_cfs_throttled_periods_total` (the throttled share of them), advancing with the wall
clock at each container's throttling ratio. Its own `CollectorRegistry`, on 127.0.0.1, ephemeral port.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, Metric

from tests.promstack.target import ScrapeTarget

PERIODS_PER_SECOND = 10.0  # the default cfs_period_us is 100 ms


@dataclass
class _Container:
    throttling: float
    periods: float = 0.0
    throttled: float = 0.0
    at: float = 0.0


class FakeCadvisor(ScrapeTarget):
    """`set_container(...)`, `remove_pod(...)`, `stop()`; `address` is what Prometheus scrapes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._containers: dict[tuple[str, str, str], _Container] = {}
        super().__init__()

    def set_container(self, namespace: str, pod: str, container: str, *, throttling: float) -> None:
        """From now on the container is throttled in `throttling` (0-1) of its CFS periods."""
        with self._lock:
            now = time.monotonic()
            current = self._containers.get((namespace, pod, container))
            if current is None:
                self._containers[(namespace, pod, container)] = _Container(throttling, at=now)
            else:
                self._advance(current, now)
                current.throttling = throttling

    def remove_pod(self, namespace: str, pod: str) -> None:
        with self._lock:
            for key in [k for k in self._containers if k[:2] == (namespace, pod)]:
                del self._containers[key]

    @staticmethod
    def _advance(c: _Container, now: float) -> None:
        periods = (now - c.at) * PERIODS_PER_SECOND
        c.periods, c.throttled, c.at = c.periods + periods, c.throttled + periods * c.throttling, now

    def collect(self) -> Iterator[Metric]:
        labels = ["namespace", "pod", "container", "id", "image", "name"]
        periods = CounterMetricFamily("container_cpu_cfs_periods", "Number of elapsed enforcement period intervals.",
                                      labels=labels)
        throttled = CounterMetricFamily("container_cpu_cfs_throttled_periods",
                                        "Number of throttled period intervals.", labels=labels)
        with self._lock:
            now = time.monotonic()
            for (namespace, pod, container), c in sorted(self._containers.items()):
                self._advance(c, now)
                values = [namespace, pod, container, f"/kubepods/pod{pod}/{container}",
                          "registry.example.com/x:1", f"k8s_{container}_{pod}"]
                periods.add_metric(values, c.periods)
                throttled.add_metric(values, c.throttled)
        yield periods
        yield throttled
