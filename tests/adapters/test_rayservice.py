"""RayService v1 over HTTP with both CRDs installed (issue 17): pods → RayCluster → RayService, each link believed
by uid and KubeRay's labels; the change goes into spec.rayClusterConfig as a JSON merge patch carrying that whole
subtree, conditional on the resourceVersion. KubeRay carries a template change to pods by preparing a new
RayCluster (a zero-downtime upgrade), during which the reactor waits; it never carries a replicas change."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import (
    GPU,
    custom,
    install,
    owner_ref,
    ray_service_cluster,
    ray_service_status,
    set_status,
)
from tests.adapters.steps import post
from tests.adapters.workloads import ray_group, ray_service
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

ACTIVE = "serve-a1b2c"
WORKER = f"{ACTIVE}-gpu-workers-worker-00000"
MEDIUM = "medium-priority-gpu"


@pytest.fixture
def service(reactor: Reactor) -> dict[str, Any]:
    install(reactor.sim, "ray.io_rayclusters.yaml", "ray.io_rayservices.yaml")
    ray_service(reactor.sim, [ray_group("gpu-workers", 4, 2, MEDIUM), ray_group("cpu-workers", 0, 1, MEDIUM)])
    ray_service_cluster(reactor.sim, "serve", "a1b2c")
    ray_service_status(reactor.sim, "serve", ACTIVE)
    return custom(reactor.sim, "rayservices", "serve")


def _post(reactor: Reactor, name: str, pod: str = WORKER, **kw: Any) -> dict[str, Any]:
    return post(reactor, name, pod, "ray-worker", **kw)


def _config(reactor: Reactor) -> dict[str, Any]:
    return custom(reactor.sim, "rayservices", "serve")["spec"]["rayClusterConfig"]


def _gpus(group: dict[str, Any]) -> str:
    return group["template"]["spec"]["containers"][0]["resources"]["limits"][GPU]


def test_an_underused_worker_group_shrinks_through_the_rayservice(reactor: Reactor, service: dict[str, Any]) -> None:
    before_cluster = custom(reactor.sim, "rayclusters", ACTIVE)
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"RayService/{NAMESPACE}/serve"), outcome
    config = _config(reactor)
    assert _gpus(config["workerGroupSpecs"][0]) == "1"
    assert config["workerGroupSpecs"][1] == service["spec"]["rayClusterConfig"]["workerGroupSpecs"][1]
    assert config["headGroupSpec"] == service["spec"]["rayClusterConfig"]["headGroupSpec"]
    # Never beneath the operator: the RayCluster KubeRay owns is left for KubeRay to replace.
    assert custom(reactor.sim, "rayclusters", ACTIVE)["spec"] == before_cluster["spec"]
    assert reactor.sim.requests[("patch", "rayservices", "")] == 1
    assert reactor.sim.requests[("patch", "rayclusters", "")] == 0


def test_the_write_is_one_merge_patch_of_the_whole_rayclusterconfig_conditional_on_the_read(
        reactor: Reactor, service: dict[str, Any]) -> None:
    sent: list[dict[str, Any]] = []
    kube = reactor.service.kube
    original = kube.patch

    def spy(kind: str, namespace: str, name: str, body: dict[str, Any], adapter: Any = None) -> dict[str, Any]:
        sent.append(copy.deepcopy(body))
        return original(kind, namespace, name, body, adapter)

    kube.patch = spy  # type: ignore[method-assign]
    try:
        assert _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)["result"] == "applied"
    finally:
        kube.patch = original  # type: ignore[method-assign]
    (body,) = sent
    assert set(body["spec"]) == {"rayClusterConfig"}
    assert body["metadata"]["resourceVersion"] == service["metadata"]["resourceVersion"]
    expected = copy.deepcopy(service["spec"]["rayClusterConfig"])
    expected["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {GPU: "1"}, "requests": {GPU: "1"}}
    assert body["spec"]["rayClusterConfig"] == expected


def test_a_saturated_group_grows_and_waits_for_kuberays_upgrade(reactor: Reactor,
                                                                        service: dict[str, Any]) -> None:
    assert _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)["result"] == "applied"
    assert int(_gpus(_config(reactor)["workerGroupSpecs"][0])) > 4
    # KubeRay prepares a new RayCluster from the changed config: a zero-downtime upgrade.
    pending = ray_service_cluster(reactor.sim, "serve", "d4e5f")
    ray_service_status(reactor.sim, "serve", ACTIVE, pending)
    early = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved")
    assert early["reason"] == "rollout-in-progress", early  # no revert in the middle of KubeRay's switch
    # The switch is done; the old cluster waits out KubeRay's deletion delay, its pods still firing then resolving:
    # the RayService no longer records it (status.activeServiceStatus names the new one), so its pods no longer
    # speak for the RayService (issue 24 item 8: a link is confirmed from the owner's side) — refused, nothing written.
    ray_service_status(reactor.sim, "serve", pending)
    retired = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved")
    assert retired["reason"] == "owner-unverified" and f"records {pending}" in retired["detail"], retired
    # So the boost stays (a revert rides on the resolve of the firing that caused it, and those pods are gone with
    # their cluster): the README's RayService row says so.
    assert int(_gpus(_config(reactor)["workerGroupSpecs"][0])) > 4


def test_a_raycluster_the_rayservice_does_not_record_is_refused(reactor: Reactor, service: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: a RayCluster carrying the RayService's uid and KubeRay's labels, with worker pods
    as KubeRay would build them, but not the one the RayService records (activeServiceStatus.rayClusterName)."""
    ray_service_cluster(reactor.sim, "serve", "zzzzz")
    outcome = _post(reactor, "GPUUnderutilized", WORKER.replace(ACTIVE, "serve-zzzzz"), value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and f"records {ACTIVE}" in outcome["detail"], outcome
    assert custom(reactor.sim, "rayservices", "serve")["spec"] == service["spec"]


def test_no_change_during_kuberays_zero_downtime_upgrade(reactor: Reactor, service: dict[str, Any]) -> None:
    svc = custom(reactor.sim, "rayservices", "serve")
    svc["spec"]["rayClusterConfig"]["rayVersion"] = "2.41.0"
    reactor.sim.apply(svc)  # someone's change: KubeRay prepares a new cluster and switches when it is ready
    pending = ray_service_cluster(reactor.sim, "serve", "d4e5f")
    ray_service_status(reactor.sim, "serve", ACTIVE, pending)
    for alert, value in (("GPUUnderutilized", 0.1), ("GPUSaturated", 0.99)):
        refused = _post(reactor, alert, value=value, gpus=4)
        assert refused["reason"] == "rollout-in-progress" and "UpgradeInProgress" in refused["detail"], refused
    assert _config(reactor)["workerGroupSpecs"] == svc["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert reactor.sim.requests[("patch", "rayservices", "")] == 0


def test_a_starved_worker_group_moves_up_the_ladder(reactor: Reactor, service: dict[str, Any]) -> None:
    assert _post(reactor, "GPUSaturated", value=0.99, gpus=4)["result"] == "applied"
    groups = _config(reactor)["workerGroupSpecs"]
    assert groups[0]["template"]["spec"]["priorityClassName"] == "high-priority-gpu"
    assert groups[1]["template"]["spec"]["priorityClassName"] == "medium-priority-gpu"


def test_replicas_are_refused_kuberay_never_carries_them_to_the_cluster(reactor: Reactor,
                                                                       service: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "replicas" in outcome["detail"], outcome
    assert [g["replicas"] for g in _config(reactor)["workerGroupSpecs"]] == [2, 1]
    assert reactor.sim.requests[("patch", "rayservices", "")] == 0


def test_upgrade_strategy_none_refuses_a_template_change(reactor: Reactor, service: dict[str, Any]) -> None:
    svc = custom(reactor.sim, "rayservices", "serve")
    svc["spec"]["upgradeStrategy"] = {"type": "None"}
    reactor.sim.apply(svc)
    ray_service_status(reactor.sim, "serve", ACTIVE)  # KubeRay observed it
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "upgradeStrategy.type is None" in outcome["detail"], outcome
    assert _gpus(_config(reactor)["workerGroupSpecs"][0]) == "4"


def test_a_change_kuberay_has_not_observed_refuses(reactor: Reactor, service: dict[str, Any]) -> None:
    svc = custom(reactor.sim, "rayservices", "serve")
    svc["spec"]["serveConfigV2"] = "applications: [{name: app}]\n"
    reactor.sim.apply(svc)  # generation 2; KubeRay observed 1
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "rollout-in-progress" and "observed generation 1 of 2" in outcome["detail"]


def test_a_raycluster_without_kuberays_labels_is_not_believed(reactor: Reactor, service: dict[str, Any]) -> None:
    """A tenant who can write RayClusters cannot steer the reactor to a RayService by pointing an ownerReference at
    it: the RayCluster must carry the labels KubeRay puts on what it builds."""
    rc = custom(reactor.sim, "rayclusters", ACTIVE)
    del rc["metadata"]["labels"]["ray.io/originated-from-crd"]
    reactor.sim.apply(rc)
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and "ray.io/originated-from-crd=RayService" in outcome["detail"]
    assert _gpus(_config(reactor)["workerGroupSpecs"][0]) == "4"


def test_an_ownerreference_with_another_uid_is_not_believed(reactor: Reactor, service: dict[str, Any]) -> None:
    rc = custom(reactor.sim, "rayclusters", ACTIVE)
    rc["metadata"]["ownerReferences"] = [dict(owner_ref(service)[0], uid="0000-forged")]
    reactor.sim.apply(rc)
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and "uid" in outcome["detail"], outcome


# kuberay v1.7.0 ray-operator/config/samples/ray-service.incremental-upgrade.yaml: the upgrade strategy as KubeRay's
# own sample writes it (validation.go ValidateClusterUpgradeOptions wants the in-tree autoscaler with it).
INCREMENTAL = {"type": "NewClusterWithIncrementalUpgrade",
               "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 10, "intervalSeconds": 30,
                                         "maxSurgePercent": 10}}


def _incremental(reactor: Reactor) -> None:
    svc = custom(reactor.sim, "rayservices", "serve")
    svc["spec"]["upgradeStrategy"] = copy.deepcopy(INCREMENTAL)
    svc["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    reactor.sim.apply(svc)
    ray_service_status(reactor.sim, "serve", ACTIVE)  # KubeRay observed it


def test_an_incremental_upgrade_with_the_gate_undeclared_is_refused_by_name(reactor: Reactor,
                                                                            service: dict[str, Any]) -> None:
    """kuberay v1.7.0 rayservice_controller.go isZeroDowntimeUpgradeEnabled: with the RayServiceIncrementalUpgrade
    gate off, NewClusterWithIncrementalUpgrade prepares no new RayCluster (as None); the gate is the operator's
    process flag, which the reactor cannot see: undeclared, a template change is refused, never guessed."""
    _incremental(reactor)
    for alert, value in (("GPUUnderutilized", 0.1), ("GPUSaturated", 0.99)):
        outcome = _post(reactor, alert, value=value, gpus=4)
        assert outcome["reason"] == "operator-forbids", outcome
        assert "adapters.rayServiceIncrementalUpgrade" in outcome["detail"], outcome
    assert _gpus(_config(reactor)["workerGroupSpecs"][0]) == "4"
    assert reactor.sim.requests[("patch", "rayservices", "")] == 0


def _declared(sim: SimCluster, token_file: Path, gate: bool) -> Reactor:
    return build_reactor(sim, dataclasses.replace(make_settings(token_file, **POLICY),
                                                  adapters_ray_incremental_gate=gate))


def test_an_incremental_upgrade_with_the_gate_declared_off_is_refused_as_none(
        reactor: Reactor, service: dict[str, Any], sim: SimCluster, token_file: Path) -> None:
    _incremental(reactor)
    declared = _declared(sim, token_file, False)
    try:
        outcome = _post(declared, "GPUUnderutilized", value=0.1, gpus=4)
    finally:
        declared.service.kube.close()
    assert outcome["reason"] == "operator-forbids" and "gate off" in outcome["detail"], outcome
    assert _gpus(_config(reactor)["workerGroupSpecs"][0]) == "4"


def test_an_incremental_upgrade_with_the_gate_declared_on_is_changed_and_waits_for_kuberay(
        reactor: Reactor, service: dict[str, Any], sim: SimCluster, token_file: Path) -> None:
    """Declared on (v1.7.0's default), KubeRay prepares a new RayCluster and shifts traffic to it step by step: the
    change is written, counted like NewCluster (every group twice: an upper bound of maxSurgePercent)."""
    _incremental(reactor)
    declared = _declared(sim, token_file, True)
    try:
        outcome = _post(declared, "GPUMemorySaturated", value=0.97, gpus=4)
        assert outcome["result"] == "applied", outcome
        assert int(_gpus(_config(reactor)["workerGroupSpecs"][0])) > 4
        pending = ray_service_cluster(sim, "serve", "d4e5f")
        ray_service_status(sim, "serve", ACTIVE, pending)
        early = _post(declared, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved")
    finally:
        declared.service.kube.close()
    assert early["reason"] == "rollout-in-progress", early  # no revert in the middle of KubeRay's traffic shift


def test_a_rollback_kuberay_is_making_is_a_rollout_in_progress(reactor: Reactor, service: dict[str, Any]) -> None:
    """kuberay v1.7.0 rayservice_controller.go (the goal reverted mid-upgrade): RollbackInProgress True with reason
    DesiredClusterSpecChanged while traffic moves back to the active cluster; the reactor waits for it."""
    pending = ray_service_cluster(reactor.sim, "serve", "d4e5f")
    ray_service_status(reactor.sim, "serve", ACTIVE, pending)
    status = custom(reactor.sim, "rayservices", "serve")["status"]
    rollback = {"type": "RollbackInProgress", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "DesiredClusterSpecChanged",
                "message": "Goal state reverted to original cluster, rolling back."}
    set_status(reactor.sim, "rayservices", "serve", {"conditions": [*status["conditions"], rollback]})
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "rollout-in-progress" and "RollbackInProgress" in outcome["detail"], outcome
    assert reactor.sim.requests[("patch", "rayservices", "")] == 0
