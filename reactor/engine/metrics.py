"""What the engine counts: the alerts notifications carried (and the ones Alertmanager left out), and rebalances."""

from __future__ import annotations

from reactor.core.metrics import Metrics, MetricSet
from reactor.core.model import KNOWN_ALERTS, TEST_ALERT, Status

REBALANCE_RESULTS = ("moved", "pending", "given-back", "restored", "not-restored", "no-donor", "source-unavailable",
                     "lost-race")


class EngineMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.alerts_received = self.counter(
            "reactor_alerts_received", "Alerts received in webhook notifications, one per alert, by name and status.",
            ["alertname", "status"],
            # the doctor reads TEST_ALERT's before it sends one
            zeroed=[(name, status) for name in [*sorted(KNOWN_ALERTS), TEST_ALERT] for status in Status])
        self.alerts_truncated = self.counter(
            "reactor_alerts_truncated", "Alerts Alertmanager left out of webhook notifications (truncatedAlerts, "
            "past the receiver's max_alerts): never seen by the reactor, one per alert.")
        self.rebalances = self.counter(
            "reactor_rebalances", "Rebalances (a donor's GPUs for a receiver refused by the quota), one per step, by "
            "result: moved (the receiver grew), pending (the donor gave; the receiver waits for the quota), "
            "given-back (the receiver could not grow in time: the donor got its GPUs back), restored (the receiver's "
            "saturation resolved: the donor got them back), not-restored, no-donor, source-unavailable, lost-race.",
            ["result"], zeroed=[(result,) for result in REBALANCE_RESULTS])
        self.rebalance_gpus_moved = self.counter(
            "reactor_rebalance_gpus_moved", "GPUs donors gave up for receivers that then grew.")
