"""What the act and record steps count: decisions that acted or refused, the GPUs they moved, the storm brake's
budget, and Events that could not be posted."""

from __future__ import annotations

from reactor.core.metrics import Metrics, MetricSet, StateGauge
from reactor.core.model import SkipReason

_REASONS = [(reason.value,) for reason in SkipReason]


class ActMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.actions = self.counter(
            "reactor_actions", "Workload decisions that chose an action, one per workload per notification, by "
            "action and what happened to it.", ["action", "result", "namespace"])
        self.alerts_skipped = self.counter(
            "reactor_alerts_skipped", "Alerts refused before any workload decision (screening, resolving the "
            "owner), one per alert, by reason.", ["reason"], zeroed=_REASONS)
        self.workload_skips = self.counter(
            "reactor_workload_skips", "Workload decisions that refused to act, one per workload per notification "
            "(however many alerts name it), by reason.", ["reason"], zeroed=_REASONS)
        self.gpus_changed = self.counter(
            "reactor_gpus_changed", "GPUs (per pod × replicas) that applied actions released or added.",
            ["direction", "namespace"])
        self.budget_limit = self.gauge(
            "reactor_budget_limit", "Actions allowed per budget window (configuration).", ["scope"])
        self.events_dropped = self.counter(
            "reactor_events_dropped", "Kubernetes Events not posted: the queue to the Events API was full.")
        self.budget_used = StateGauge(
            "reactor_budget_used", "Actions counted in the budget's sliding window now (namespace: the fullest "
            "namespace's).", ["scope"])
        self.states(self.budget_used)
