"""What the webhook counts: its answers by status, the 401s by why, and how long each answer took."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from reactor.core.metrics import WEBHOOK_BUCKETS, Metrics, MetricSet


class WebhookMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        r = self.registry
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
        for code in ("200", "400", "401", "413", "415", "503"):
            self.webhook_requests.labels(code=code)
        for credentials in ("missing", "wrong"):
            self.webhook_unauthorized.labels(credentials=credentials)
