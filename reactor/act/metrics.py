"""What the act and record steps count: decisions that acted or refused, the GPUs they moved, the storm brake's
budget, and Events that could not be posted."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from reactor.core.metrics import Metrics, MetricSet, StateGauge
from reactor.core.model import SkipReason


class ActMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        r = self.registry
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
        self.budget_limit = Gauge(
            "reactor_budget_limit", "Actions allowed per budget window (configuration).", ["scope"], registry=r,
        )
        self.events_dropped = Counter(
            "reactor_events_dropped", "Kubernetes Events not posted: the queue to the Events API was full.",
            registry=r,
        )
        self.budget_used = StateGauge(
            "reactor_budget_used", "Actions counted in the budget's sliding window now (namespace: the fullest "
            "namespace's).", ["scope"])
        self.states(self.budget_used)
        for reason in SkipReason:
            self.alerts_skipped.labels(reason=reason.value)
            self.workload_skips.labels(reason=reason.value)
