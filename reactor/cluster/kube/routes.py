"""Where each kind the reactor reads or writes lives on the API server: its path and resource name.

The paths are the API server's own (`/api/v1/namespaces/{namespace}/pods/{name}`, `/apis/apps/v1/...`), as the
official client's generated methods build them; the gateway sends them through the client's `ApiClient`
(rest.py) rather than through those generated API classes, whose import alone loads some 340 model modules
(about 32 MB of the worker's memory) and whose every call validates its arguments with pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from reactor.core.errors import PermanentError

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"  # custom resources take no strategic merge


@dataclass(frozen=True, slots=True)
class Route:
    prefix: str  # "/api/v1" (the core group) or "/apis/GROUP/VERSION"
    resource: str
    namespaced: bool = True

    def collection(self, namespace: str = "") -> str:
        """The kind's collection in `namespace`; "" is every namespace (or a cluster-scoped kind's only one)."""
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{segment(namespace)}/{self.resource}"
        return f"{self.prefix}/{self.resource}"

    def item(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{segment(name)}"


ROUTES: dict[str, Route] = {
    "Pod": Route("/api/v1", "pods"),
    "ReplicaSet": Route("/apis/apps/v1", "replicasets"),
    "Deployment": Route("/apis/apps/v1", "deployments"),
    "StatefulSet": Route("/apis/apps/v1", "statefulsets"),
    "Job": Route("/apis/batch/v1", "jobs"),
    "CronJob": Route("/apis/batch/v1", "cronjobs"),
    "LimitRange": Route("/api/v1", "limitranges"),
    "ResourceQuota": Route("/api/v1", "resourcequotas"),
    "HorizontalPodAutoscaler": Route("/apis/autoscaling/v2", "horizontalpodautoscalers"),
}
PRIORITY_CLASSES = Route("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False)
EVENTS = Route("/api/v1", "events")
LEASES = Route("/apis/coordination.k8s.io/v1", "leases")
NAMESPACES = Route("/api/v1", "namespaces", namespaced=False)
ACCESS_REVIEWS = Route("/apis/authorization.k8s.io/v1", "selfsubjectaccessreviews", namespaced=False)


def route(kind: str) -> Route:
    """The built-in route of `kind`; an operator's kind reaches here only when no adapter for it is enabled."""
    found = ROUTES.get(kind)
    if found is None:
        raise PermanentError(f"{kind} is not a built-in kind and no enabled adapter serves it")
    return found


def listed(kind: str) -> Route:
    """The route a list or watch of `kind` takes (PriorityClass is cluster-scoped and has no `get` here)."""
    return PRIORITY_CLASSES if kind == "PriorityClass" else ROUTES[kind]


def custom(group: str, version: str, plural: str) -> Route:
    """An operator's resource: namespaced unless asked for without a namespace (Kueue's ClusterQueue)."""
    return Route(f"/apis/{segment(group)}/{segment(version)}", segment(plural))


def segment(text: str) -> str:
    """One path segment, escaped as the generated client escapes path parameters."""
    return quote(text, safe="")
