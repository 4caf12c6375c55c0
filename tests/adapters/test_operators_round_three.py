"""Issue 36: no write that restarts what it should not, no change that never lands. Each case on the operators' real
CRDs (../shared/crds), its objects built as the operator's own code builds them (tests/adapters/operators.py, the
upstream function named on each), and `reactor plan` on it saying the change and what it does to running pods, or
the refusal and why."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from reactor.app.assembly import build_engine
from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError
from reactor.intake.alerts import parse_notification
from reactor.integrations.adapters.ray import ALLOW_RECREATE
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import (
    GPU,
    container,
    custom,
    install_upstream,
    needs_shared,
    ray_service_cluster,
    ray_service_status,
    reconcile_lws,
    reconcile_ray,
)
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

pytestmark = needs_shared


def _post(reactor: Reactor, alert: str, pod: str, name: str, **kw: Any) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec(alert, NAMESPACE, pod, name, **kw)]))
    assert r.status_code == 200, r.get_json()
    (outcome,) = r.get_json()["outcomes"]
    return outcome


def _plan(reactor: Reactor, alert: str, pod: str, name: str, value: float, gpus: int) -> str:
    """`reactor plan`: the engine in dry run and `print_plan`, as tests/adapters/test_plan.py runs them."""
    settings = reactor.service.engine.settings
    dry = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    engine = build_engine(dry, kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(notification([AlertSpec(alert, NAMESPACE, pod, name, value,
                                                                                      gpus)]))), engine.settings)
    return out.getvalue()


def _headroom(reactor: Reactor, gpus: int) -> None:
    """The namespace's GPU quota set to what is in use plus `gpus`."""
    quota = reactor.sim.get("resourcequotas", NAMESPACE, "gpu-quota")
    quota["spec"]["hard"][f"requests.{GPU}"] = str(int(quota["status"]["used"][f"requests.{GPU}"]) + gpus)
    reactor.sim.apply(quota)
    reactor.sim.settle()


def _events(reactor: Reactor, name: str, reason: str = "") -> list[dict[str, Any]]:
    return [e for e in reactor.sim.list("events", NAMESPACE)
            if e["involvedObject"]["name"] == name and (not reason or e["reason"] == reason)]


# --- A (item 10): RayCluster Recreate restarts the whole cluster: only on an explicit opt-in ------------------------

RAY_WORKER = "ray-gpu-workers-worker-00000"


def _ray_cluster(reactor: Reactor, annotations: dict[str, str]) -> dict[str, Any]:
    """A RayCluster with upgradeStrategy Recreate; KubeRay's pods made by reconcile_ray (raycluster_controller.go
    reconcilePods / shouldRecreatePodsForUpgrade)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml")
    group = {"groupName": "gpu-workers", "replicas": 2, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
             "template": {"spec": {"containers": [container("ray-worker", 4)]}}}
    reactor.sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": annotations},
                       "spec": {"rayVersion": "2.40.0", "upgradeStrategy": {"type": "Recreate"},
                                "headGroupSpec": {"rayStartParams": {},
                                                  "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                                "workerGroupSpecs": [group]}})
    reconcile_ray(reactor.sim, "ray")
    return custom(reactor.sim, "rayclusters", "ray")


@pytest.mark.parametrize("annotations", [{}, {ALLOW_RECREATE: "yes"}], ids=["unset", "not-true"])
def test_recreate_without_the_opt_in_is_refused_saying_every_pod_restarts(reactor: Reactor,
                                                                         annotations: dict[str, str]) -> None:
    cluster = _ray_cluster(reactor, annotations)
    text = _plan(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", 0.1, 4)
    assert "operator-forbids" in text and "head included" in text and ALLOW_RECREATE in text, text
    outcome = _post(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "every running Ray job on it stops" in outcome["detail"]
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]
    (event,) = _events(reactor, "ray", "OperatorForbids")
    assert event["type"] == "Warning" and "head included" in event["message"], event
    # Replicas are no template change: KubeRay scales the group without recreating anything.
    assert _post(reactor, "GPUIdle", RAY_WORKER, "ray-worker", value=0.0, gpus=4)["result"] == "applied"


def test_recreate_with_the_opt_in_applies_and_says_so_in_the_plan_and_the_event(reactor: Reactor) -> None:
    _ray_cluster(reactor, {ALLOW_RECREATE: "true"})
    text = _plan(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", 0.1, 4)
    assert "would apply: resize-gpu ray-worker: 4 → 1" in text and "head included" in text, text
    outcome = _post(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", value=0.1, gpus=4)
    assert outcome["result"] == "applied" and "head included" in outcome["detail"], outcome
    messages = [e["message"] for e in _events(reactor, "ray") if e["type"] == "Normal"]
    assert any("resize-gpu" in m and "every running Ray job on it stops" in m for m in messages), messages


# --- B (item 4): a RayService template change starts a whole new RayCluster --------------------------------------

def _ray_service(reactor: Reactor, strategy: str | None = "NewCluster") -> None:
    """A RayService whose RayCluster has a 1-GPU head, `gpu-workers` (2 × 4 GPUs) and `big` (3 × 8 GPUs); its active
    RayCluster as rayservice_controller.go constructRayClusterForRayService builds it (ray_service_cluster)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml", "ray.io_rayservices.yaml")

    def group(name: str, gpus: int, replicas: int) -> dict[str, Any]:
        return {"groupName": name, "replicas": replicas, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", gpus)]}}}
    reactor.sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService",
                       "metadata": {"name": "serve", "namespace": NAMESPACE},
                       "spec": {"serveConfigV2": "applications: []\n",
                                **({"upgradeStrategy": {"type": strategy}} if strategy else {}),
                                "rayClusterConfig": {
                                    "rayVersion": "2.40.0",
                                    "headGroupSpec": {"rayStartParams": {}, "template": {
                                        "spec": {"containers": [container("ray-head", 1)]}}},
                                    "workerGroupSpecs": [group("gpu-workers", 4, 2), group("big", 8, 3)]}}})
    active = ray_service_cluster(reactor.sim, "serve", "a1b2c")
    ray_service_status(reactor.sim, "serve", active)


def test_a_rayservice_template_change_is_charged_the_whole_new_raycluster(reactor: Reactor) -> None:
    """Shrinking gpu-workers 4 → 1 starts a new RayCluster of 2 × 1 + 1 (head) + 3 × 8 = 27 GPUs beside the active
    one; the reactor used to charge the changed group's 2."""
    _ray_service(reactor)
    pod = "serve-a1b2c-gpu-workers-worker-00000"
    _headroom(reactor, 26)
    outcome = _post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 27 GPUs" in outcome["detail"], outcome
    assert "quota-exceeded" in _plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
    _headroom(reactor, 27)
    assert "would apply: resize-gpu ray-worker: 4 → 1" in _plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
    assert _post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)["result"] == "applied"


# --- C (item 9) and D (item 6): LeaderWorkerSet surge groups are whole; a partition is refused ---------------------

def _lws(reactor: Reactor, rolling: dict[str, Any]) -> dict[str, Any]:
    """2 groups of 4: a 4-GPU leader and 3 workers of 8 GPUs; the leader and worker StatefulSets as lws v0.10.0
    leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration and pod_controller.go
    constructWorkerStatefulSetApplyConfiguration build them (reconcile_lws)."""
    install_upstream(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    reactor.sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                       "metadata": {"name": "vllm", "namespace": NAMESPACE},
                       "spec": {"replicas": 2,
                                "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling},
                                "leaderWorkerTemplate": {
                                    "size": 4,
                                    "leaderTemplate": {"spec": {"containers": [container("vllm-leader", 4)]}},
                                    "workerTemplate": {"spec": {"containers": [container("vllm-worker", 8)]}}}}})
    reconcile_lws(reactor.sim, "vllm")
    return custom(reactor.sim, "leaderworkersets", "vllm")


def test_an_lws_surge_group_is_charged_whole_leader_and_workers(reactor: Reactor) -> None:
    """maxSurge 1: a leader shrink 4 → 1 starts one surge group, its new leader (1 GPU) and its 3 workers of 8 GPUs
    (the worker StatefulSet every leader pod gets): 25 GPUs; the reactor used to charge the leader's 1."""
    _lws(reactor, {"maxSurge": 1, "maxUnavailable": 1})
    _headroom(reactor, 24)
    outcome = _post(reactor, "GPUUnderutilized", "vllm-0", "vllm-leader", value=0.1, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 25 GPUs" in outcome["detail"], outcome
    _headroom(reactor, 25)
    assert "would apply: resize-gpu vllm-leader: 4 → 1" in _plan(reactor, "GPUUnderutilized", "vllm-0",
                                                                  "vllm-leader", 0.1, 4)
    assert _post(reactor, "GPUUnderutilized", "vllm-0", "vllm-leader", value=0.1, gpus=4)["result"] == "applied"


def test_an_lws_with_a_partition_refuses_a_template_change_by_name(reactor: Reactor) -> None:
    lws = _lws(reactor, {"maxSurge": 0, "maxUnavailable": 1, "partition": 1})
    text = _plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "operator-forbids" in text and "partition is 1" in text, text
    outcome = _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)
    assert outcome["reason"] == "operator-forbids" and "groups 0–0 never get the change" in outcome["detail"]
    assert custom(reactor.sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


def test_an_lws_with_partition_zero_changes(reactor: Reactor) -> None:
    _lws(reactor, {"maxSurge": 0, "maxUnavailable": 1, "partition": 0})
    assert _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)["result"] == "applied"


# --- E (item 5): a RayService with upgradeStrategy unset follows KubeRay's ENABLE_ZERO_DOWNTIME -------------------

def test_an_unset_upgrade_strategy_is_declared_in_the_policy_or_refused(sim: SimCluster, token_file: Path) -> None:
    """kuberay v1.7.0 rayservice_controller.go isZeroDowntimeUpgradeEnabled: with upgradeStrategy.type unset KubeRay
    prepares a new RayCluster unless its ENABLE_ZERO_DOWNTIME is "false" — the operator's environment, invisible
    through the API. Undeclared: refused by name; declared false: refused, saying the change never lands; true:
    applied (and charged the whole new RayCluster)."""
    pod = "serve-a1b2c-gpu-workers-worker-00000"
    for declared, expected in ((None, "adapters.rayServiceZeroDowntime"), (False, "ENABLE_ZERO_DOWNTIME false"),
                               (True, "")):
        reactor = build_reactor(sim, dataclasses.replace(make_settings(token_file, **POLICY),
                                                         adapters_ray_zero_downtime=declared))
        try:
            if declared is None:
                _ray_service(reactor, strategy=None)
            before = custom(sim, "rayservices", "serve")["spec"]
            text = _plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
            outcome = _post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)
            if expected:
                assert outcome["reason"] == "operator-forbids" and expected in outcome["detail"], outcome
                assert "operator-forbids" in text and "isZeroDowntimeUpgradeEnabled" in text, text
                assert custom(sim, "rayservices", "serve")["spec"] == before
            else:
                assert "would apply: resize-gpu ray-worker: 4 → 1" in text and outcome["result"] == "applied", outcome
        finally:
            reactor.service.kube.close()
    with pytest.raises(ConfigError, match="adapters.rayServiceZeroDowntime"):
        build_settings({"adapters": {"rayServiceZeroDowntime": "false"}}, {})


# --- F (item 2): scaling a Kueue-managed RayCluster suspends it --------------------------------------------------

KUEUE = "kueue-v0.19.2"


def _kueue_ray_cluster(reactor: Reactor, annotations: dict[str, str]) -> dict[str, Any]:
    """A RayCluster submitted to LocalQueue team-a (Kueue v0.19.2's real CRDs: v1beta2 served), KubeRay's pods made
    by reconcile_ray; the queue's objects as tests/adapters/test_kueue.py makes them."""
    sim = reactor.sim
    install_upstream(sim, "ray.io_rayclusters.yaml", *(f"{KUEUE}/kueue.x-k8s.io_{p}.yaml" for p in (
        "workloadpriorityclasses", "clusterqueues", "localqueues", "workloads")))
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
               "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                   {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 64}]}]}]}})
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}})
    group = {"groupName": "gpu-workers", "replicas": 2, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
             "template": {"spec": {"containers": [container("ray-worker", 4)]}}}
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": annotations,
                            "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
               "spec": {"rayVersion": "2.40.0",
                        "headGroupSpec": {"rayStartParams": {},
                                          "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                        "workerGroupSpecs": [group]}})
    reconcile_ray(sim, "ray")
    return custom(sim, "rayclusters", "ray")


@pytest.mark.parametrize("annotations, expected", [
    ({}, "EquivalentToWorkload"), ({"kueue.x-k8s.io/elastic-job": "true"}, "ElasticJobsViaWorkloadSlices feature gate"),
], ids=["not-elastic", "elastic"])
def test_a_kueue_managed_raycluster_is_not_scaled(reactor: Reactor, annotations: dict[str, str],
                                                  expected: str) -> None:
    cluster = _kueue_ray_cluster(reactor, annotations)
    text = _plan(reactor, "GPUIdle", RAY_WORKER, "ray-worker", 0.0, 4)
    assert "operator-forbids" in text and "head included" in text and expected in text, text
    outcome = _post(reactor, "GPUIdle", RAY_WORKER, "ray-worker", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "suspend" in outcome["detail"], outcome
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]
