"""What the webhook counts: its answers by status, the 401s by why, and how long each answer took."""

from __future__ import annotations

from reactor.core.metrics import WEBHOOK_BUCKETS, Metrics, MetricSet


class WebhookMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.webhook_requests = self.counter(
            "reactor_webhook_requests", "Webhook requests answered, one per request, by HTTP status.", ["code"],
            zeroed=[(code,) for code in ("200", "400", "401", "413", "415", "503")])
        # Why a 401: no bearer token at all (a probe, or an Alertmanager receiver without credentials) or a wrong one
        # (a stale copy of the Secret). `reactor doctor` reads it: its own reachability probe sends none.
        self.webhook_unauthorized = self.counter(
            "reactor_webhook_unauthorized", "Webhook requests refused 401, by what the credentials were: missing "
            "(no bearer token) or wrong.", ["credentials"], zeroed=[("missing",), ("wrong",)])
        self.webhook_duration = self.histogram(
            "reactor_webhook_duration_seconds", "Time to answer one webhook request, in seconds.",
            buckets=WEBHOOK_BUCKETS)
