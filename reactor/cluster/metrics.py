"""What the cluster stage counts: every Kubernetes API request, and the watch cache's size and state."""

from __future__ import annotations

from reactor.core.metrics import Metrics, MetricSet, StateGauge


class ClusterMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.kube_requests = self.counter(
            "reactor_kube_requests", "Kubernetes API requests, one per request, by verb, resource and HTTP status.",
            ["verb", "resource", "code"])
        self.cache_objects = StateGauge(
            "reactor_cache_objects", "Objects the watch cache holds now, by kind.", ["kind"])
        self.cache_synced = StateGauge(
            "reactor_cache_synced", "1 when every informer of the kind has listed and its watch is not failing, "
            "else 0.", ["kind"])
        self.states(self.cache_objects, self.cache_synced)
