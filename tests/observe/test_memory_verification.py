"""The read-back of an in-place memory raise, over HTTP against the embedded cluster, as for CPU: not verified
while the kubelet has not applied it (Proposed, InProgress), verified once it has; Infeasible on a node whose
memory can never hold it → reverted after `verify.timeout`, the pods resized back. The verifier's clock is
injected and the embedded kubelet is stepped by hand (`controllers.run_once`: one sync)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.observe.resize_support import trainer_cluster, trainer_pod, verification, verifier_of
from tests.observe.test_verification import Clock
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _reactor(node_memory: str, token_file: Path, clock: Clock) -> Iterator[tuple[SimCluster, Reactor]]:
    for sim in trainer_cluster(node_memory=node_memory):
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


def test_an_in_place_memory_raise_is_verified_once_the_kubelet_applied_it(
        roomy: tuple[SimCluster, Reactor], clock: Clock) -> None:
    sim, r = roomy
    outcome = _raise(r)
    assert (outcome["result"], outcome["action"], outcome["to"]) == ("applied", "resize-memory", "10240Mi")
    assert trainer_pod(sim, "memory") == ("10Gi", "8Gi", [])  # Proposed: the kubelet has not synced yet
    clock.at(5)
    assert verifier_of(r).check_all() == 1
    assert verification(sim)["result"] == "pending", "an owner patch alone is not a verified raise"
    sim.controllers.run_once()  # the kubelet allocates it
    assert trainer_pod(sim, "memory") == ("10Gi", "8Gi", ["PodResizeInProgress"])
    clock.at(45)  # past verify.timeout, but the kubelet is actuating it
    verifier_of(r).check_all()
    assert verification(sim)["result"] == "pending" and trainer_pod(sim, "memory")[0] == "10Gi", "not reverted mid-way"
    sim.controllers.run_once()  # actuated
    assert trainer_pod(sim, "memory") == ("10Gi", "10Gi", [])
    verifier_of(r).check_all()
    assert verification(sim)["result"] == "verified"


def test_an_infeasible_memory_raise_is_reverted_on_the_pods_after_the_timeout(
        tight: tuple[SimCluster, Reactor], clock: Clock) -> None:
    sim, r = tight
    assert _raise(r)["result"] == "applied"
    sim.settle()
    assert trainer_pod(sim, "memory") == ("10Gi", "8Gi", ["PodResizePending"])
    clock.at(31)
    verifier_of(r).check_all()
    verdict = verification(sim)
    assert (verdict["result"], verdict["strategy"]) == ("reverted", "resize-memory-up")
    assert "Infeasible: Node didn't have enough capacity: memory" in verdict["reason"]
    sim.settle()
    assert trainer_pod(sim, "memory") == ("8Gi", "8Gi", []), "resized back in place"
