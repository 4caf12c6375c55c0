"""What the engine counts: the alerts notifications carried (and the ones Alertmanager left out), and rebalances."""

from __future__ import annotations

from prometheus_client import Counter

from reactor.core.metrics import Metrics, MetricSet
from reactor.core.model import KNOWN_ALERTS, TEST_ALERT, Status

REBALANCE_RESULTS = ("moved", "pending", "given-back", "restored", "not-restored", "no-donor", "source-unavailable",
                     "lost-race")


class EngineMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        r = self.registry
        self.alerts_received = Counter(
            "reactor_alerts_received", "Alerts received in webhook notifications, one per alert, by name and status.",
            ["alertname", "status"], registry=r,
        )
        self.alerts_truncated = Counter(
            "reactor_alerts_truncated", "Alerts Alertmanager left out of webhook notifications (truncatedAlerts, "
            "past the receiver's max_alerts): never seen by the reactor, one per alert.", registry=r,
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
        for name in [*sorted(KNOWN_ALERTS), TEST_ALERT]:  # the doctor reads TEST_ALERT's before it sends one
            for status in Status:
                self.alerts_received.labels(alertname=name, status=status)
        for result in REBALANCE_RESULTS:
            self.rebalances.labels(result=result)
