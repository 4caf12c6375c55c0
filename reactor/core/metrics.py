"""Every metric the reactor exports, created in one place on an injectable registry.

Label values come from closed sets (action, result, reason, code, verb) or from namespaces,
never from pod names or fingerprints, so the number of series stays bounded. Known label
combinations are set to zero at start so that dashboards see them before the first event.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from reactor import __version__
from reactor.core.model import KNOWN_ALERTS, TEST_ALERT, Result, SkipReason, Status

ACTIONS = ("resize-gpu", "scale-replicas", "set-priority", "revert", "resize-cpu", "resize-memory")
RESULTS = (Result.APPLIED, Result.RECOMMENDED, Result.FAILED)
WEBHOOK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The reactor's metrics on one registry (a fresh `CollectorRegistry()` in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.alerts_received = Counter(
            "reactor_alerts_received", "Alerts received in webhook notifications.",
            ["alertname", "status"], registry=r,
        )
        self.actions = Counter(
            "reactor_actions", "Actions decided, by what happened to them.",
            ["action", "result", "namespace"], registry=r,
        )
        self.skips = Counter("reactor_skips", "Decisions that refused to act, by reason.", ["reason"], registry=r)
        self.gpus_changed = Counter(
            "reactor_gpus_changed", "GPUs requested by workloads, released or added by applied actions.",
            ["direction", "namespace"], registry=r,
        )
        self.webhook_requests = Counter(
            "reactor_webhook_requests", "Webhook requests answered, by HTTP status.", ["code"], registry=r,
        )
        self.webhook_duration = Histogram(
            "reactor_webhook_duration_seconds", "Time to answer one webhook request.",
            buckets=WEBHOOK_BUCKETS, registry=r,
        )
        self.kube_requests = Counter(
            "reactor_kube_requests", "Kubernetes API requests, by verb, resource and HTTP status.",
            ["verb", "resource", "code"], registry=r,
        )
        self.budget_used = Gauge(
            "reactor_budget_used", "Actions counted in the current budget window.", ["scope"], registry=r,
        )
        self.budget_limit = Gauge(
            "reactor_budget_limit", "Actions allowed per budget window.", ["scope"], registry=r,
        )
        self.verifications = Counter(
            "reactor_verifications", "Rollouts of the reactor's changes followed to an end, by result.",
            ["result"], registry=r,
        )
        self.events_dropped = Counter(
            "reactor_events_dropped", "Kubernetes Events not posted: the queue to the Events API was full.",
            registry=r,
        )
        self.gpus_released = Gauge(
            "reactor_gpus_released", "GPUs the reactor's changes currently hold back (original minus current).",
            ["namespace"], registry=r,
        )
        self.gpus_added = Gauge(
            "reactor_gpus_added", "GPUs the reactor's changes currently add (current minus original).",
            ["namespace"], registry=r,
        )
        self.gpu_seconds_saved = Counter(
            "reactor_gpu_seconds_saved", "GPU-seconds held back by the reactor's changes.", ["namespace"], registry=r,
        )
        self.gpu_cost_saved = Counter(
            "reactor_gpu_cost_saved", "Cost of the GPU-hours held back, at finops.gpuHourlyCost of gpuResource.",
            ["namespace"], registry=r,
        )
        self.gpu_hourly_cost = Gauge(
            "reactor_gpu_hourly_cost", "The cost of one GPU-hour, per resource, as configured (finops.gpuHourlyCost).",
            ["resource"], registry=r,
        )
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
            self.skips.labels(reason=reason.value)
        for result in ("verified", "reverted"):
            self.verifications.labels(result=result)
        for code in ("200", "400", "401", "413", "415", "503"):
            self.webhook_requests.labels(code=code)
