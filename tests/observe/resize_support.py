"""What the in-place resize tests (CPU and memory) share: one 2-GPU trainer on one GPU node sized per test, and
the read-backs of its pod and its sealed verification."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from reactor.observe.verifier import Verifier
from reactor.state.annotations import VERIFICATION
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, Reactor


def trainer_cluster(*, node_cpu: str = "64", node_memory: str = "512Gi",
                    resize: dict[str, str] | None = None) -> Iterator[SimCluster]:
    """The cluster, settled: the trainer's pod (2 GPUs, 2 CPUs, 8 Gi; `resize`: its resizePolicy) Running on the
    node."""
    trainer = build.container(gpus=2, cpu="2", memory="8Gi", resize=resize or {})
    with build.start(build.namespace(), build.namespace("gpu-reactor"),
                     build.gpu_node(cpu=node_cpu, memory=node_memory), build.deployment("trainer", trainer)) as sim:
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
