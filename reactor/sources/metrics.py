"""What the rebalancer's alert source counts: its requests to Alertmanager's API v2, by result and duration. (The
confirm step declares its own beside it, in confirm.py.)"""

from __future__ import annotations

from reactor.core.metrics import WEBHOOK_BUCKETS, Metrics, MetricSet

ALERT_SOURCE_RESULTS = ("ok", "unreachable", "timeout", "refused", "invalid")
ALERT_SOURCE_BUCKETS = (*WEBHOOK_BUCKETS, 60.0)  # its timeout may be up to a minute


class SourceMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.alert_source_requests = self.counter(
            "reactor_alert_source_requests", "Requests to Alertmanager's API v2 for the alerts firing now "
            "(rebalancing's donors), one per request, by result: ok; unreachable (no connection, TLS, DNS, an "
            "unreadable token or CA file); timeout (rebalance.alertmanagerTimeout); refused (a non-2xx answer, "
            "401 and 403 included); invalid (not JSON, not API v2's shape, over the size caps).", ["result"],
            zeroed=[(result,) for result in ALERT_SOURCE_RESULTS])
        self.alert_source_duration = self.histogram(
            "reactor_alert_source_duration_seconds", "Time of one request to Alertmanager's API v2 (rebalancing's "
            "alert source), in seconds, whatever its result.", buckets=ALERT_SOURCE_BUCKETS)
        self.entries_skipped = self.counter(
            "reactor_alert_source_entries_skipped", "Alerts in Alertmanager's API v2 answer left out because they do "
            "not parse as an alert (the others of the answer are read).")
