"""The embedded cluster at scale: how long `settle()` takes to bring N pods of D Deployments in K
namespaces (a GPU ResourceQuota each) to Running on enough Ready 8-GPU Nodes.

It builds and times the simulator only (no reactor); the figure goes into `bench/results.json` as the
`sim_settle` row. It asserts nothing about time: tests check the outcome, the bench reports the time.
"""

from __future__ import annotations

import math
import os
import time
from fractions import Fraction
from typing import Any

from reactor_sim import SimCluster
from reactor_sim.admission import recount

GPU = "nvidia.com/gpu"
NODE_GPUS = 8
NODE_PODS = 110  # the kubelet's default max-pods


def manifests(pods: int, deployments: int, namespaces: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster objects, Deployments): 1-GPU pods spread evenly; quotas and nodes with 10% headroom."""
    if pods % deployments or deployments % namespaces:
        raise ValueError("pods must divide by deployments, and deployments by namespaces")
    names = [f"scale-{i}" for i in range(namespaces)]
    per_ns_gpus = pods // namespaces
    docs: list[dict[str, Any]] = []
    for ns in names:
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        docs.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
                     "spec": {"hard": {f"requests.{GPU}": str(math.ceil(per_ns_gpus * 1.1)), "pods": str(pods)}}})
    nodes = math.ceil(pods * 1.1 / min(NODE_GPUS, NODE_PODS))
    docs += [_node(f"gpu-node-{i:05d}") for i in range(nodes)]
    per_ns = deployments // namespaces
    workloads = [_deployment(ns, f"model-{d:03d}", pods // deployments) for ns in names for d in range(per_ns)]
    return docs, workloads


def _node(name: str) -> dict[str, Any]:
    room = {"cpu": "64", "memory": "512Gi", "pods": str(NODE_PODS), GPU: str(NODE_GPUS)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": room, "allocatable": dict(room),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def _deployment(ns: str, name: str, replicas: int) -> dict[str, Any]:
    gpu = {GPU: "1"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "img:1",
                                                           "resources": {"limits": gpu, "requests": dict(gpu)}}]}}}}


def build(sim: SimCluster, pods: int, deployments: int, namespaces: int) -> float:
    """Apply the cluster and its Deployments, settle; the seconds `settle()` took."""
    docs, workloads = manifests(pods, deployments, namespaces)
    sim.apply(docs)
    sim.apply(workloads)
    started = time.perf_counter()
    sim.settle(max_rounds=200)
    return time.perf_counter() - started


def quotas_match_recount(sim: SimCluster) -> bool:
    """Every quota's status.used for pods equals a full recount over its namespace's pods."""
    from reactor_sim import quantity
    with sim.store.lock:
        for quota in sim.store.view("resourcequotas"):
            used = {k: quantity.parse(v) for k, v in (quota.get("status") or {}).get("used", {}).items()}
            counted: dict[str, Fraction] = recount(sim.store, quota)
            if any(used.get(k) != v for k, v in counted.items()):
                return False
    return True


def measure(pods: int = 10_000, deployments: int = 100, namespaces: int = 5) -> dict[str, Any]:
    """The bench row: settle seconds, what settled, and the load average it ran under."""
    with SimCluster() as sim:
        load_before = os.getloadavg()[0]
        seconds = build(sim, pods, deployments, namespaces)
        running = sum(1 for p in sim.store.view("pods") if (p.get("status") or {}).get("phase") == "Running")
        return {"pods": pods, "deployments": deployments, "namespaces": namespaces, "settle_s": round(seconds, 2),
                "running": running, "quotas_match_recount": quotas_match_recount(sim),
                "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cpus": os.cpu_count()}


if __name__ == "__main__":
    import json
    import sys
    sizes = [int(a) for a in sys.argv[1:4]] or [10_000, 100, 5]
    print(json.dumps(measure(*sizes)))
