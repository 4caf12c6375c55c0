"""Kueue: a workload with the `kueue.x-k8s.io/queue-name` label is admitted by Kueue, not only by the namespace.

Its priority is the `kueue.x-k8s.io/priority-class` label naming a WorkloadPriorityClass (the ladder
names those), not the pod template's `priorityClassName`; and its GPUs must fit its ClusterQueue's
quota: for the GPU resource, the nominalQuota of every flavor minus what the ClusterQueue's status
reports in use (flavorsUsage). This is kept apart from the namespace's ResourceQuota arithmetic:
`cluster_queue_quota` yields one more (hard, used) pair, which `with_cluster_queue` adds to the bounds as
one more quota the workload's pods count against (every quota must hold a change, so the tighter wins).
Pure: no I/O; the reader fetches the LocalQueue, the ClusterQueue and the classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reactor.core.model import Bounds, Quota, Workload
from reactor.core.quantity import value

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def queue_of(obj: Mapping[str, Any]) -> str:
    """The LocalQueue a workload is submitted to ("" when Kueue does not manage it)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_LABEL)
    return value if isinstance(value, str) else ""


def as_managed(workload: Workload, obj: Mapping[str, Any]) -> Workload:
    """The workload as Kueue sees it: its queue, and its priority read from the Kueue label."""
    queue = queue_of(obj)
    if not queue:
        return workload
    labels = (obj.get("metadata") or {}).get("labels") or {}
    label = labels.get(PRIORITY_LABEL)
    return replace(workload, queue=queue, priority_class=label if isinstance(label, str) else None)


def cluster_queue_quota(cluster_queue: Mapping[str, Any], resource: str) -> tuple[int, int] | None:
    """(nominal quota, in use) of `resource` over the ClusterQueue's flavors; None when it sets no quota for it."""
    nominal = _sum(((cluster_queue.get("spec") or {}).get("resourceGroups") or []), resource, "nominalQuota",
                   groups=True)
    if nominal is None:
        return None
    used = _sum(((cluster_queue.get("status") or {}).get("flavorsUsage") or []), resource, "total", groups=False)
    return nominal, used or 0


def _sum(items: list[Any], resource: str, field: str, *, groups: bool) -> int | None:
    flavors = [f for g in items if isinstance(g, Mapping) for f in g.get("flavors") or []] if groups else items
    total: int | None = None
    for flavor in flavors:
        for entry in (flavor.get("resources") or []) if isinstance(flavor, Mapping) else []:
            if isinstance(entry, Mapping) and entry.get("name") == resource and entry.get(field) is not None:
                total = (total or 0) + value(entry[field])
    return total


def with_cluster_queue(bounds: Bounds, quota: tuple[int, int] | None, queue: str) -> Bounds:
    """The bounds with the ClusterQueue's GPU quota as one more quota, unscoped: it counts every pod of the queue."""
    if quota is None:
        return bounds
    hard, used = quota
    return replace(bounds, quotas=(*bounds.quotas, Quota(name=f"ClusterQueue of LocalQueue {queue}", hard=hard,
                                                         used=used)))
