"""The watch cache's memory per 1,000 cached workloads, on the bench's own cluster.

Every object of the cached kinds is serialised and parsed again (as the informer receives it over HTTP)
and put in a `Store` under tracemalloc: the bytes the store holds, divided per 1,000 objects. Measured in
the bench process, not in the reactor's worker (whose RSS the memory step reports), so the figure is the
cache's own and not the noise of a whole process.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from reactor.cluster.cache import ALL, Store
from reactor.cluster.informer import CACHED
from reactor_sim import SimCluster

RESOURCES = {"Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
             "Job": "jobs", "CronJob": "cronjobs", "LimitRange": "limitranges", "ResourceQuota": "resourcequotas",
             "HorizontalPodAutoscaler": "horizontalpodautoscalers", "PriorityClass": "priorityclasses"}


def cache_memory(sim: SimCluster) -> dict[str, Any]:
    texts = {kind: [json.dumps(o) for o in sim.list(resource)] for kind, resource in RESOURCES.items()}
    store = Store(CACHED)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for kind, objs in texts.items():
            store.replace(kind, ALL, [json.loads(t) for t in objs])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    count = store.count()
    return {"objects": count, "by_kind": {k: len(v) for k, v in texts.items()}, "bytes": held,
            "mb_per_1000": round(held / max(1, count) * 1000 / 1e6, 2)}
