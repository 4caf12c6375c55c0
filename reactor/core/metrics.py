"""Every metric the reactor exports, created in one place on an injectable registry.

Label values come from closed sets (action, result, reason, code, verb, kind) or from namespaces,
never from pod names or fingerprints, so the number of series stays bounded. Known label
combinations are set to zero at start so that dashboards see them before the first event.

Each counter counts one thing (its help text says which: alerts, workload decisions, requests, GPU-seconds).
Gauges that describe state (the budget's use, the watch cache, the verifier's backlog and Lease, the GPUs held
back) are `StateGauge`s: read from the part that holds the state when Prometheus scrapes, so they are never
stale. The process (`process_*`), platform (`python_info`) and garbage-collector (`python_gc_*`) collectors are
registered on the same registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

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
from reactor.core.model import KNOWN_ALERTS, TEST_ALERT, Result, SkipReason, Status

ACTIONS = ("resize-gpu", "scale-replicas", "set-priority", "revert", "resize-cpu", "resize-memory")
RESULTS = (Result.APPLIED, Result.RECOMMENDED, Result.FAILED)
ALERT_SOURCE_RESULTS = ("ok", "unreachable", "timeout", "refused", "invalid")
WEBHOOK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ALERT_SOURCE_BUCKETS = (*WEBHOOK_BUCKETS, 60.0)  # its timeout may be up to a minute

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


REBALANCE_RESULTS = ("moved", "pending", "given-back", "restored", "not-restored", "no-donor", "source-unavailable",
                     "lost-race")


class Metrics:
    """The reactor's metrics on one registry (a fresh `CollectorRegistry()` in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.alerts_received = Counter(
            "reactor_alerts_received", "Alerts received in webhook notifications, one per alert, by name and status.",
            ["alertname", "status"], registry=r,
        )
        self.alerts_truncated = Counter(
            "reactor_alerts_truncated", "Alerts Alertmanager left out of webhook notifications (truncatedAlerts, "
            "past the receiver's max_alerts): never seen by the reactor, one per alert.", registry=r,
        )
        self.actions = Counter(
            "reactor_actions", "Workload decisions that chose an action, one per workload per notification, by "
            "action and what happened to it.", ["action", "result", "namespace"], registry=r,
        )
        self.alerts_skipped = Counter(
            "reactor_alerts_skipped", "Alerts refused before any workload decision (screening, resolving the "
            "owner), one per alert, by reason.", ["reason"], registry=r,
        )
        self.workload_skips = Counter(
            "reactor_workload_skips", "Workload decisions that refused to act, one per workload per notification "
            "(however many alerts name it), by reason.", ["reason"], registry=r,
        )
        self.gpus_changed = Counter(
            "reactor_gpus_changed", "GPUs (per pod × replicas) that applied actions released or added.",
            ["direction", "namespace"], registry=r,
        )
        self.webhook_requests = Counter(
            "reactor_webhook_requests", "Webhook requests answered, one per request, by HTTP status.", ["code"],
            registry=r,
        )
        # Why a 401: no bearer token at all (a probe, or an Alertmanager receiver without credentials) or a wrong one
        # (a stale copy of the Secret). `reactor doctor` reads it: its own reachability probe sends none.
        self.webhook_unauthorized = Counter(
            "reactor_webhook_unauthorized", "Webhook requests refused 401, by what the credentials were: missing "
            "(no bearer token) or wrong.", ["credentials"], registry=r,
        )
        self.webhook_duration = Histogram(
            "reactor_webhook_duration_seconds", "Time to answer one webhook request, in seconds.",
            buckets=WEBHOOK_BUCKETS, registry=r,
        )
        self.kube_requests = Counter(
            "reactor_kube_requests", "Kubernetes API requests, one per request, by verb, resource and HTTP status.",
            ["verb", "resource", "code"], registry=r,
        )
        self.budget_limit = Gauge(
            "reactor_budget_limit", "Actions allowed per budget window (configuration).", ["scope"], registry=r,
        )
        self.verifications = Counter(
            "reactor_verifications", "Rollouts of the reactor's changes followed to an end, one per change, by "
            "result.", ["result"], registry=r,
        )
        self.rebalances = Counter(
            "reactor_rebalances", "Rebalances (a donor's GPUs for a receiver refused by the quota), one per step, by "
            "result: moved (the receiver grew), pending (the donor gave; the receiver waits for the quota), "
            "given-back (the receiver could not grow in time: the donor got its GPUs back), restored (the receiver's "
            "saturation resolved: the donor got them back), not-restored, no-donor, source-unavailable, lost-race.",
            ["result"], registry=r,
        )
        self.rebalance_gpus_moved = Counter(
            "reactor_rebalance_gpus_moved", "GPUs donors gave up for receivers that then grew.", registry=r,
        )
        self.events_dropped = Counter(
            "reactor_events_dropped", "Kubernetes Events not posted: the queue to the Events API was full.",
            registry=r,
        )
        self.gpu_seconds_saved = Counter(
            "reactor_gpu_seconds_saved", "GPU-seconds held back by the reactor's changes while they stand "
            "(reactor_gpus_released integrated over time).", ["namespace"], registry=r,
        )
        self.gpu_cost_saved = Counter(
            "reactor_gpu_cost_saved", "Cost of the GPU-seconds saved, at finops.gpuHourlyCost of gpuResource, in "
            "that price's currency.", ["namespace"], registry=r,
        )
        self.gpu_hourly_cost = Gauge(
            "reactor_gpu_hourly_cost", "The cost of one GPU-hour, per resource, as configured (finops.gpuHourlyCost).",
            ["resource"], registry=r,
        )
        # The rebalancer's alert source (sources/alertmanager.py): one per HTTP request to Alertmanager's API v2.
        self.alert_source_requests = Counter(
            "reactor_alert_source_requests", "Requests to Alertmanager's API v2 for the alerts firing now "
            "(rebalancing's donors), one per request, by result: ok; unreachable (no connection, TLS, DNS, an "
            "unreadable token or CA file); timeout (rebalance.alertmanagerTimeout); refused (a non-2xx answer, "
            "401 and 403 included); invalid (not JSON, not API v2's shape, over the size caps).", ["result"],
            registry=r,
        )
        self.alert_source_duration = Histogram(
            "reactor_alert_source_duration_seconds", "Time of one request to Alertmanager's API v2 (rebalancing's "
            "alert source), in seconds, whatever its result.", buckets=ALERT_SOURCE_BUCKETS, registry=r,
        )
        # --- state, read at scrape time ---
        self.budget_used = StateGauge(
            "reactor_budget_used", "Actions counted in the budget's sliding window now (namespace: the fullest "
            "namespace's).", ["scope"])
        self.cache_objects = StateGauge(
            "reactor_cache_objects", "Objects the watch cache holds now, by kind.", ["kind"])
        self.cache_synced = StateGauge(
            "reactor_cache_synced", "1 when every informer of the kind has listed and its watch is not failing, "
            "else 0.", ["kind"])
        self.verifications_pending = StateGauge(
            "reactor_verifications_pending", "Workloads whose change the verifier still follows (its backlog).")
        self.verifier_leader = StateGauge(
            "reactor_verifier_leader", "1 while this replica verifies (holds the verifier Lease, or runs without "
            "one), else 0.")
        self.gpus_released = StateGauge(
            "reactor_gpus_released", "GPUs (per pod × replicas) the reactor's standing changes hold back now: "
            "recorded original minus current.", ["namespace"])
        self.gpus_added = StateGauge(
            "reactor_gpus_added", "GPUs (per pod × replicas) the reactor's standing changes add now: current minus "
            "recorded original.", ["namespace"])
        r.register(_StateCollector([self.budget_used, self.cache_objects, self.cache_synced,
                                    self.verifications_pending, self.verifier_leader, self.gpus_released,
                                    self.gpus_added]))
        if r is not REGISTRY:  # prometheus_client's default registry has them already
            for collector in (ProcessCollector, PlatformCollector, GCCollector):
                collector(registry=r)
        self.build_info = Info("reactor_build", "Version of the running reactor.", registry=r)
        self.build_info.info({"version": __version__})
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._zero()

    def child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: label values come from bounded sets (see above), and the
        lookup `labels()` does (validate, stringify, lock) would otherwise be paid on every request."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def _zero(self) -> None:
        for name in [*sorted(KNOWN_ALERTS), TEST_ALERT]:  # the doctor reads TEST_ALERT's before it sends one
            for status in Status:
                self.alerts_received.labels(alertname=name, status=status)
        for reason in SkipReason:
            self.alerts_skipped.labels(reason=reason.value)
            self.workload_skips.labels(reason=reason.value)
        for result in ("verified", "reverted"):
            self.verifications.labels(result=result)
        for result in REBALANCE_RESULTS:
            self.rebalances.labels(result=result)
        for code in ("200", "400", "401", "413", "415", "503"):
            self.webhook_requests.labels(code=code)
        for credentials in ("missing", "wrong"):
            self.webhook_unauthorized.labels(credentials=credentials)
        for result in ALERT_SOURCE_RESULTS:
            self.alert_source_requests.labels(result=result)
