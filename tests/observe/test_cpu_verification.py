"""The read-back of an in-place CPU raise, over HTTP against the embedded cluster: the verifier follows the kubelet,
not the owner's patch. Proposed (not looked at yet) and InProgress (allocated, being actuated) are not done: never
marked verified; InProgress is not stalled either: never reverted mid-way, even past `verify.timeout`. Applied on
every pod → verified. Infeasible past the timeout → reverted, the pods resized back. The verifier's clock is
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


def _cluster(node_cpu: str) -> Iterator[SimCluster]:
    yield from trainer_cluster(node_cpu=node_cpu, resize={"cpu": "NotRequired"})


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


@pytest.mark.parametrize("reactor", ["roomy"], indirect=True)
def test_in_progress_is_neither_verified_nor_reverted(roomy: SimCluster, reactor: Reactor, clock: Clock) -> None:
    outcome = _raise(reactor)
    assert (outcome["result"], outcome["to"]) == ("applied", "3000m")
    assert trainer_pod(roomy, "cpu") == ("3", "2", [])  # Proposed: the kubelet has not synced yet
    clock.at(5)
    assert verifier_of(reactor).check_all() == 1
    assert verification(roomy)["result"] == "pending", "an owner patch alone is not a verified raise"
    roomy.controllers.run_once()  # the kubelet allocates it
    assert trainer_pod(roomy, "cpu") == ("3", "2", ["PodResizeInProgress"])
    clock.at(45)  # past verify.timeout, but the kubelet is actuating it
    verifier_of(reactor).check_all()
    assert verification(roomy)["result"] == "pending"
    assert trainer_pod(roomy, "cpu")[0] == "3", "not reverted mid-way"
    assert reactor.metric("reactor_verifications_total", result="reverted") == 0
    roomy.controllers.run_once()  # actuated
    assert trainer_pod(roomy, "cpu") == ("3", "3", [])
    verifier_of(reactor).check_all()
    assert verification(roomy)["result"] == "verified"
    assert reactor.metric("reactor_verifications_total", result="verified") == 1


@pytest.mark.parametrize("reactor", ["tight"], indirect=True)
def test_an_infeasible_raise_is_reverted_on_the_pods_after_the_timeout(tight: SimCluster, reactor: Reactor,
                                                                      clock: Clock) -> None:
    assert _raise(reactor)["result"] == "applied"
    tight.settle()
    assert trainer_pod(tight, "cpu") == ("3", "2", ["PodResizePending"])
    clock.at(20)
    verifier_of(reactor).check_all()
    assert verification(tight)["result"] == "pending"
    clock.at(31)
    verifier_of(reactor).check_all()
    verdict = verification(tight)
    assert (verdict["result"], verdict["strategy"]) == ("reverted", "resize-cpu-up")
    assert "Infeasible: Node didn't have enough capacity: cpu, requested: 3000, capacity: 2500" in verdict["reason"]
    tight.settle()
    assert trainer_pod(tight, "cpu") == ("2", "2", []), "resized back in place"
    assert verifier_of(reactor).check_all() == 0
