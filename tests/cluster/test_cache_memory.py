"""The watch cache's memory per 1,000 cached workloads, measured with tracemalloc (the figure the bench reports).

Objects are parsed from JSON as the informer receives them, with the `managedFields` a real API server
adds; the store keeps them without those. The bound is loose (machines differ) but fails if the store
kept copies or the managedFields.
"""

from __future__ import annotations

import copy
import json
import tracemalloc
from typing import Any

from reactor.cluster.cache import Store
from reactor.cluster.informer import CACHED

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {f"f:k{i}": {} for i in range(20)}},
                         "f:status": {f"f:c{i}": {} for i in range(30)}}}]


def deployment(i: int) -> dict[str, Any]:
    container = {"name": "server", "image": "registry.example.com/llm:1.2.3",
                 "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "8", "memory": "64Gi"},
                               "requests": {"nvidia.com/gpu": "4", "cpu": "8", "memory": "64Gi"}},
                 "ports": [{"containerPort": 8000, "protocol": "TCP"}], "env": [{"name": "MODEL", "value": "m"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"llm-{i}", "namespace": f"team-{i % 5}", "uid": f"uid-{i:032d}",
                         "resourceVersion": str(1000 + i), "generation": 3, "labels": {"app": f"llm-{i}"},
                         "annotations": {"gpu-reactor.io/mode": "enforce"},
                         "managedFields": copy.deepcopy(MANAGED)},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": f"llm-{i}"}},
                     "template": {"metadata": {"labels": {"app": f"llm-{i}"}},
                                  "spec": {"priorityClassName": "medium-priority-gpu", "containers": [container]}}},
            "status": {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "observedGeneration": 3}}


def cached_bytes(count: int) -> int:
    texts = [json.dumps(deployment(i)) for i in range(count)]
    store = Store(CACHED)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.replace("Deployment", "", [json.loads(t) for t in texts])
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert store.count() == count
    return after - before


def test_memory_per_thousand_cached_workloads_is_bounded() -> None:
    per_thousand = cached_bytes(1000)
    print(f"watch cache: {per_thousand / 1e6:.2f} MB per 1,000 Deployments")
    assert 0 < per_thousand < 10_000_000
    assert cached_bytes(2000) < 2.3 * per_thousand  # linear: nothing kept per object beyond the object


def test_the_store_keeps_no_managed_fields() -> None:
    store = Store(CACHED)
    store.replace("Deployment", "", [deployment(1)])
    obj = store.lookup("Deployment", "team-1", "llm-1")
    assert isinstance(obj, dict) and "managedFields" not in obj["metadata"]
