"""The read-back of an in-place CPU raise, over HTTP against the embedded cluster: the verifier follows the kubelet,
not the owner's patch. Proposed (not looked at yet) and InProgress (allocated, being actuated) are not done: never
marked verified; InProgress is not stalled either: never reverted mid-way, even past `verify.timeout`. Applied on
every pod → verified. Infeasible past the timeout → reverted, the pods resized back. The verifier's clock is
injected and the embedded kubelet is stepped by hand (`controllers.run_once`: one sync)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.annotations import VERIFICATION
from reactor.sim import SimCluster
from reactor.tools.payloads import AlertSpec, notification
from reactor.verifier import Verifier
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings
from tests.test_verification import Clock

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
  capacity: {cpu: "CPU", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "CPU", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
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
        resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]
        resources:
          limits: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
          requests: {nvidia.com/gpu: "2", cpu: "2", memory: 8Gi}
"""


def _cluster(node_cpu: str) -> Iterator[SimCluster]:
    with SimCluster().start() as sim:
        sim.load_manifests(MANIFESTS.replace('"CPU"', f'"{node_cpu}"'))
        sim.settle()
        yield sim


@pytest.fixture
def roomy() -> Iterator[SimCluster]:
    yield from _cluster("64")


@pytest.fixture
def tight() -> Iterator[SimCluster]:
    """A node of 2.5 cores: the trainer's 2 fit, the 3 it is raised to never will (Infeasible)."""
    yield from _cluster("2500m")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reactor(request: pytest.FixtureRequest, token_file: Path, clock: Clock) -> Iterator[Reactor]:
    sim: SimCluster = request.getfixturevalue(request.param)
    settings = make_settings(token_file, cooldown="0s", verify={"timeout": "30s", "interval": "1s"})
    r = build_reactor(sim, settings, clock=clock)
    try:
        yield r
    finally:
        r.service.kube.close()


def _raise(r: Reactor) -> dict[str, Any]:
    specs = [AlertSpec("GPUStarvedByCPU", NAMESPACE, pod, "main", 0.2, 2, extra_annotations={"cpu_throttling": "0.5"})
             for pod in r.pods("trainer")]
    (outcome,) = r.post(notification(specs)).get_json()["outcomes"]
    return outcome


def _verifier(r: Reactor) -> Verifier:
    assert r.service.verifier is not None
    return r.service.verifier


def _verification(sim: SimCluster) -> dict[str, Any]:
    return json.loads(sim.get("deployments", NAMESPACE, "trainer")["metadata"]["annotations"][VERIFICATION])


def _pod(sim: SimCluster) -> tuple[str, str, list[str]]:
    """(spec CPU limit, CPU the kubelet reports applied, resize conditions) of the trainer's one pod."""
    (pod,) = sim.list("pods", NAMESPACE, label_selector="app=trainer")
    applied = pod["status"]["containerStatuses"][0]["resources"]["limits"]["cpu"]
    kinds = [c["type"] for c in pod["status"].get("conditions") or [] if c["type"].startswith("PodResize")]
    return pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], applied, kinds


@pytest.mark.parametrize("reactor", ["roomy"], indirect=True)
def test_in_progress_is_neither_verified_nor_reverted(roomy: SimCluster, reactor: Reactor, clock: Clock) -> None:
    outcome = _raise(reactor)
    assert (outcome["result"], outcome["to"]) == ("applied", "3000m")
    assert _pod(roomy) == ("3", "2", [])  # Proposed: the kubelet has not synced yet
    clock.at(5)
    assert _verifier(reactor).check_all() == 1
    assert _verification(roomy)["result"] == "pending", "an owner patch alone is not a verified raise"
    roomy.controllers.run_once()  # the kubelet allocates it
    assert _pod(roomy) == ("3", "2", ["PodResizeInProgress"])
    clock.at(45)  # past verify.timeout, but the kubelet is actuating it
    _verifier(reactor).check_all()
    assert _verification(roomy)["result"] == "pending"
    assert _pod(roomy)[0] == "3", "not reverted mid-way"
    assert reactor.metric("reactor_verifications_total", result="reverted") == 0
    roomy.controllers.run_once()  # actuated
    assert _pod(roomy) == ("3", "3", [])
    _verifier(reactor).check_all()
    assert _verification(roomy)["result"] == "verified"
    assert reactor.metric("reactor_verifications_total", result="verified") == 1


@pytest.mark.parametrize("reactor", ["tight"], indirect=True)
def test_an_infeasible_raise_is_reverted_on_the_pods_after_the_timeout(tight: SimCluster, reactor: Reactor,
                                                                      clock: Clock) -> None:
    assert _raise(reactor)["result"] == "applied"
    tight.settle()
    assert _pod(tight) == ("3", "2", ["PodResizePending"])
    clock.at(20)
    _verifier(reactor).check_all()
    assert _verification(tight)["result"] == "pending"
    clock.at(31)
    _verifier(reactor).check_all()
    verification = _verification(tight)
    assert (verification["result"], verification["strategy"]) == ("reverted", "resize-cpu-up")
    assert "Infeasible: Node didn't have enough capacity: cpu, requested: 3000, capacity: 2500" in verification["reason"]
    tight.settle()
    assert _pod(tight) == ("2", "2", []), "resized back in place"
    assert _verifier(reactor).check_all() == 0
