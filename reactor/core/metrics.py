"""The shared vocabulary of the reactor's metrics: one registry per process (injectable), and the pattern every stage
declares its own metrics with.

Each stage declares the metrics it counts in its own module (intake/metrics.py, engine/metrics.py, act/metrics.py,
cluster/metrics.py, observe/metrics.py, sources/metrics.py) as a `MetricSet`, created once per registry (`of`);
the application assembly asks every stage for its set at start, so every family, and its known label combinations
set to zero, is there before the first event. Label values come from closed sets (action, result, reason, code,
verb, kind) or from namespaces, never from pod names or fingerprints, so the number of series stays bounded.

Gauges that describe state (the budget's use, the watch cache, the verifier's backlog and Lease, the GPUs held
back) are `StateGauge`s: read from the part that holds the state when Prometheus scrapes, so they are never
stale. The process (`process_*`), platform (`python_info`) and garbage-collector (`python_gc_*`) collectors are
registered on the same registry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reactor import __version__

# The buckets of every duration histogram of a request (the webhook's answer, a question to a source).
WEBHOOK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

log = logging.getLogger(__name__)
Samples = Mapping[tuple[str, ...], float]  # label values (in `labels` order) -> value


class StateGauge:
    """A gauge whose samples are read from a source at scrape time (`read_from`); absent until one is given.

    The source returns {label values: value}; it must be cheap and must not block (it runs on the scrape's
    thread): it reads what its part already holds in memory, never the API server.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        self.name, self.documentation, self.labels = name, documentation, tuple(labels)
        self._source: Callable[[], Samples] | None = None

    def read_from(self, source: Callable[[], Samples] | None) -> None:
        self._source = source

    def family(self) -> GaugeMetricFamily | None:
        source = self._source
        if source is None:
            return None
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, value in sorted(source().items()):
            family.add_metric(list(values), value)
        return family


class _StateCollector(Collector):
    """The registry's view of every StateGauge: one family each, read when scraped."""

    def __init__(self, gauges: Sequence[StateGauge]) -> None:
        self._gauges = tuple(gauges)

    def describe(self) -> list[Any]:
        return []  # the samples come and go with their sources: nothing to check at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for gauge in self._gauges:
            try:
                family = gauge.family()
            except Exception:  # noqa: BLE001 - one broken source must not fail the whole scrape
                log.exception("metric source failed", extra={"metric": gauge.name})
                continue
            if family is not None:
                yield family


_Set = TypeVar("_Set", bound="MetricSet")


class Metrics:
    """The reactor's registry (a fresh `CollectorRegistry()` in tests) and what every stage's metrics share: the
    process collectors, the build info, the label-child cache, and each stage's `MetricSet`, created once."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        if self.registry is not REGISTRY:  # prometheus_client's default registry has them already
            for collector in (ProcessCollector, PlatformCollector, GCCollector):
                collector(registry=self.registry)
        self.build_info = Info("reactor_build", "Version of the running reactor.", registry=self.registry)
        self.build_info.info({"version": __version__})
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._sets: dict[type[MetricSet], MetricSet] = {}
        self._lock = threading.Lock()

    def child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: label values come from bounded sets (see above), and the
        lookup `labels()` does (validate, stringify, lock) would otherwise be paid on every request."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def set_of(self, kind: type[_Set]) -> _Set:
        """The stage's metric set on this registry, created (its metrics declared and zeroed) on first use."""
        with self._lock:
            found = self._sets.get(kind)
            if found is None:
                found = self._sets[kind] = kind(self)
            return found  # type: ignore[return-value]


class MetricSet:
    """A stage's metrics, declared in the stage's own module on the reactor's registry (`counter`, `gauge`,
    `histogram` register there); its `StateGauge`s, given to `states`, are read at scrape time. Get it with
    `Kind.of(metrics)`: one per registry."""

    def __init__(self, metrics: Metrics) -> None:
        self.registry = metrics.registry

    @classmethod
    def of(cls: type[_Set], metrics: Metrics) -> _Set:
        return metrics.set_of(cls)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = (), *,
                zeroed: Iterable[Sequence[str]] = ()) -> Counter:
        """`zeroed`: the label values known at start (in `labels` order), each series created at zero, so that
        it is there before its first event (a rate over a series that appears at 1 misses that first 1)."""
        counter = Counter(name, documentation, labels, registry=self.registry)
        for values in zeroed:
            counter.labels(*values)
        return counter

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def histogram(self, name: str, documentation: str, buckets: Sequence[float]) -> Histogram:
        return Histogram(name, documentation, buckets=buckets, registry=self.registry)

    def states(self, *gauges: StateGauge) -> None:
        """Register the set's state gauges: one collector, read when Prometheus scrapes."""
        self.registry.register(_StateCollector(gauges))
