"""What the in-place resize tests (CPU and memory) share: one 2-GPU trainer on one GPU node sized per test, and
the read-backs of its pod and its sealed verification."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from reactor.observe.verifier import Verifier
from reactor.state.annotations import VERIFICATION
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor

MANIFESTS = """
apiVersion: v1
kind: Namespace
metadata: {name: ml-workloads}
---
apiVersion: v1
kind: Namespace
metadata: {name: gpu-reactor}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-node-1, labels: {kubernetes.io/hostname: gpu-node-1}}
status:
  capacity: {cpu: "NODE_CPU", memory: NODE_MEMORY, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "NODE_CPU", memory: NODE_MEMORY, pods: "110", nvidia.com/gpu: "8"}
  conditions: [{type: Ready, status: "True", reason: KubeletReady}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml-workloads}
spec:
  replicas: 1
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      containers:
      - name: main
        image: registry.example.com/trainer:3
        resizePolicy: RESIZE_POLICY
        resources:
          limits: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
          requests: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
"""


def trainer_cluster(*, node_cpu: str = "64", node_memory: str = "512Gi",
                    resize_policy: str = "[]") -> Iterator[SimCluster]:
    """The cluster, settled: the trainer's pod Running on the node."""
    with SimCluster().start() as sim:
        sim.load_manifests(MANIFESTS.replace("NODE_CPU", node_cpu).replace("NODE_MEMORY", node_memory)
                           .replace("RESIZE_POLICY", resize_policy))
        sim.settle()
        yield sim


def verifier_of(r: Reactor) -> Verifier:
    assert r.service.verifier is not None
    return r.service.verifier


def verification(sim: SimCluster) -> dict[str, Any]:
    return json.loads(sim.get("deployments", NAMESPACE, "trainer")["metadata"]["annotations"][VERIFICATION])


def trainer_pod(sim: SimCluster, resource: str) -> tuple[str, str, list[str]]:
    """(spec limit, the limit the kubelet reports applied, resize conditions) of the trainer's one pod."""
    (pod,) = sim.list("pods", NAMESPACE, label_selector="app=trainer")
    applied = pod["status"]["containerStatuses"][0]["resources"]["limits"][resource]
    kinds = [c["type"] for c in pod["status"].get("conditions") or [] if c["type"].startswith("PodResize")]
    return pod["spec"]["containers"][0]["resources"]["limits"][resource], applied, kinds
