"""The read-back of an in-place memory raise, over HTTP against the embedded cluster, as for CPU: not verified
while the kubelet has not applied it (Proposed, InProgress), verified once it has; Infeasible on a node whose
memory can never hold it → reverted after `verify.timeout`, the pods resized back. The verifier's clock is
injected and the embedded kubelet is stepped by hand (`controllers.run_once`: one sync)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.annotations import VERIFICATION
from reactor.sim import SimCluster
from reactor.tools.payloads import AlertSpec, notification
from reactor.verifier import Verifier
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
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
  capacity: {cpu: "64", memory: MEMORY, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "64", memory: MEMORY, pods: "110", nvidia.com/gpu: "8"}
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
        resources:
          limits: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
          requests: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
"""


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = START + timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _reactor(node_memory: str, token_file: Path, clock: Clock) -> Iterator[tuple[SimCluster, Reactor]]:
    with SimCluster().start() as sim:
        sim.load_manifests(MANIFESTS.replace("MEMORY", node_memory))
        sim.settle()
        settings = make_settings(token_file, cooldown="0s", verify={"timeout": "30s", "interval": "1s"})
        r = build_reactor(sim, settings, clock=clock)
        try:
            yield sim, r
        finally:
            r.service.kube.close()


@pytest.fixture
def roomy(token_file: Path, clock: Clock) -> Iterator[tuple[SimCluster, Reactor]]:
    yield from _reactor("512Gi", token_file, clock)


@pytest.fixture
def tight(token_file: Path, clock: Clock) -> Iterator[tuple[SimCluster, Reactor]]:
    """A node of 9Gi: the trainer's 8Gi fit, the 10Gi it is raised to never will (Infeasible)."""
    yield from _reactor("9Gi", token_file, clock)


def _raise(r: Reactor) -> dict[str, Any]:
    specs = [AlertSpec("GPUContainerNearMemoryLimit", NAMESPACE, pod, "main", 0.95, 2) for pod in r.pods("trainer")]
    (outcome,) = r.post(notification(specs)).get_json()["outcomes"]
    return outcome


def _verifier(r: Reactor) -> Verifier:
    assert r.service.verifier is not None
    return r.service.verifier


def _verification(sim: SimCluster) -> dict[str, Any]:
    return json.loads(sim.get("deployments", NAMESPACE, "trainer")["metadata"]["annotations"][VERIFICATION])


def _pod(sim: SimCluster) -> tuple[str, str, list[str]]:
    """(spec memory limit, memory the kubelet reports applied, resize conditions) of the trainer's one pod."""
    (pod,) = sim.list("pods", NAMESPACE, label_selector="app=trainer")
    applied = pod["status"]["containerStatuses"][0]["resources"]["limits"]["memory"]
    kinds = [c["type"] for c in pod["status"].get("conditions") or [] if c["type"].startswith("PodResize")]
    return pod["spec"]["containers"][0]["resources"]["limits"]["memory"], applied, kinds


def test_an_in_place_memory_raise_is_verified_once_the_kubelet_applied_it(
        roomy: tuple[SimCluster, Reactor], clock: Clock) -> None:
    sim, r = roomy
    outcome = _raise(r)
    assert (outcome["result"], outcome["action"], outcome["to"]) == ("applied", "resize-memory", "10240Mi")
    assert _pod(sim) == ("10Gi", "8Gi", [])  # Proposed: the kubelet has not synced yet
    clock.at(5)
    assert _verifier(r).check_all() == 1
    assert _verification(sim)["result"] == "pending", "an owner patch alone is not a verified raise"
    sim.controllers.run_once()  # the kubelet allocates it
    assert _pod(sim) == ("10Gi", "8Gi", ["PodResizeInProgress"])
    clock.at(45)  # past verify.timeout, but the kubelet is actuating it
    _verifier(r).check_all()
    assert _verification(sim)["result"] == "pending" and _pod(sim)[0] == "10Gi", "not reverted mid-way"
    sim.controllers.run_once()  # actuated
    assert _pod(sim) == ("10Gi", "10Gi", [])
    _verifier(r).check_all()
    assert _verification(sim)["result"] == "verified"


def test_an_infeasible_memory_raise_is_reverted_on_the_pods_after_the_timeout(
        tight: tuple[SimCluster, Reactor], clock: Clock) -> None:
    sim, r = tight
    assert _raise(r)["result"] == "applied"
    sim.settle()
    assert _pod(sim) == ("10Gi", "8Gi", ["PodResizePending"])
    clock.at(31)
    _verifier(r).check_all()
    verification = _verification(sim)
    assert (verification["result"], verification["strategy"]) == ("reverted", "resize-memory-up")
    assert "Infeasible: Node didn't have enough capacity: memory" in verification["reason"]
    sim.settle()
    assert _pod(sim) == ("8Gi", "8Gi", []), "resized back in place"
