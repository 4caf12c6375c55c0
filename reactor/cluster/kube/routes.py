"""Where each built-in kind lives in the official client: its API class, resource name and method suffix."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes import client as k8s

from reactor.core.errors import PermanentError

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"  # custom resources take no strategic merge


@dataclass(frozen=True, slots=True)
class Route:
    api: type
    resource: str
    suffix: str  # method name suffix, e.g. "namespaced_deployment"


ROUTES: dict[str, Route] = {
    "Pod": Route(k8s.CoreV1Api, "pods", "namespaced_pod"),
    "ReplicaSet": Route(k8s.AppsV1Api, "replicasets", "namespaced_replica_set"),
    "Deployment": Route(k8s.AppsV1Api, "deployments", "namespaced_deployment"),
    "StatefulSet": Route(k8s.AppsV1Api, "statefulsets", "namespaced_stateful_set"),
    "Job": Route(k8s.BatchV1Api, "jobs", "namespaced_job"),
    "CronJob": Route(k8s.BatchV1Api, "cronjobs", "namespaced_cron_job"),
    "LimitRange": Route(k8s.CoreV1Api, "limitranges", "namespaced_limit_range"),
    "ResourceQuota": Route(k8s.CoreV1Api, "resourcequotas", "namespaced_resource_quota"),
    "HorizontalPodAutoscaler": Route(
        k8s.AutoscalingV2Api, "horizontalpodautoscalers", "namespaced_horizontal_pod_autoscaler"
    ),
}


def route(kind: str) -> Route:
    """The built-in route of `kind`; an operator's kind reaches here only when no adapter for it is enabled."""
    found = ROUTES.get(kind)
    if found is None:
        raise PermanentError(f"{kind} is not a built-in kind and no enabled adapter serves it")
    return found


def resource(kind: str) -> str:
    return "priorityclasses" if kind == "PriorityClass" else ROUTES[kind].resource
