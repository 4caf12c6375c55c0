"""Issue 36: no write that restarts what it should not, no change that never lands. Each case on the operators' real
CRDs (../shared/crds), its objects built as the operator's own code builds them (tests/adapters/operators.py, the
upstream function named on each), and `reactor plan` on it saying the change and what it does to running pods, or
the refusal and why."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from reactor.cluster.view import ClusterView
from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError
from reactor.integrations.adapters import Adapters
from reactor.integrations.adapters.kserve import INFERENCE_SERVICE
from reactor.integrations.adapters.ray import ALLOW_RECREATE
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import (
    GPU,
    container,
    custom,
    install_upstream,
    kueue_statefulset_webhook,
    needs_shared,
    ray_service_cluster,
    ray_service_status,
    reconcile_isvc,
    reconcile_lws,
    reconcile_ray,
)
from tests.adapters.steps import events, headroom, plan, post
from tests.adapters.workloads import (
    KUEUE_CRDS,
    KUEUE_LABELS,
    isvc_pods,
    kueue_isvc,
    kueue_queues,
    ray_group,
    ray_service,
    vllm_lws,
)
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

pytestmark = needs_shared


# --- A (item 10): RayCluster Recreate restarts the whole cluster: only on an explicit opt-in ------------------------

RAY_WORKER = "ray-gpu-workers-worker-00000"


def _ray_cluster(reactor: Reactor, annotations: dict[str, str]) -> dict[str, Any]:
    """A RayCluster with upgradeStrategy Recreate; KubeRay's pods made by reconcile_ray (raycluster_controller.go
    reconcilePods / shouldRecreatePodsForUpgrade)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml")
    reactor.sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": annotations},
                       "spec": {"rayVersion": "2.40.0", "upgradeStrategy": {"type": "Recreate"},
                                "headGroupSpec": {"rayStartParams": {},
                                                  "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                                "workerGroupSpecs": [ray_group("gpu-workers", 4, 2)]}})
    reconcile_ray(reactor.sim, "ray")
    return custom(reactor.sim, "rayclusters", "ray")


@pytest.mark.parametrize("annotations", [{}, {ALLOW_RECREATE: "yes"}], ids=["unset", "not-true"])
def test_recreate_without_the_opt_in_is_refused_saying_every_pod_restarts(reactor: Reactor,
                                                                         annotations: dict[str, str]) -> None:
    cluster = _ray_cluster(reactor, annotations)
    text = plan(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", 0.1, 4)
    assert "operator-forbids" in text and "head included" in text and ALLOW_RECREATE in text, text
    outcome = post(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "every running Ray job on it stops" in outcome["detail"]
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]
    (event,) = events(reactor, "ray", "OperatorForbids")
    assert event["type"] == "Warning" and "head included" in event["message"], event
    # Replicas are no template change: KubeRay scales the group without recreating anything.
    assert post(reactor, "GPUIdle", RAY_WORKER, "ray-worker", value=0.0, gpus=4)["result"] == "applied"


def test_recreate_with_the_opt_in_applies_and_says_so_in_the_plan_and_the_event(reactor: Reactor) -> None:
    _ray_cluster(reactor, {ALLOW_RECREATE: "true"})
    text = plan(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", 0.1, 4)
    assert "would apply: resize-gpu ray-worker: 4 → 1" in text and "head included" in text, text
    outcome = post(reactor, "GPUUnderutilized", RAY_WORKER, "ray-worker", value=0.1, gpus=4)
    assert outcome["result"] == "applied" and "head included" in outcome["detail"], outcome
    messages = [e["message"] for e in events(reactor, "ray") if e["type"] == "Normal"]
    assert any("resize-gpu" in m and "every running Ray job on it stops" in m for m in messages), messages


# --- B (item 4): a RayService template change starts a whole new RayCluster --------------------------------------

def _ray_service(reactor: Reactor, strategy: str | None = "NewCluster") -> None:
    """A RayService whose RayCluster has a 1-GPU head, `gpu-workers` (2 × 4 GPUs) and `big` (3 × 8 GPUs); its active
    RayCluster as rayservice_controller.go constructRayClusterForRayService builds it (ray_service_cluster)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml", "ray.io_rayservices.yaml")
    ray_service(reactor.sim, [ray_group("gpu-workers", 4, 2), ray_group("big", 8, 3)], head_gpus=1, strategy=strategy)
    active = ray_service_cluster(reactor.sim, "serve", "a1b2c")
    ray_service_status(reactor.sim, "serve", active)


def test_a_rayservice_template_change_is_charged_the_whole_new_raycluster(reactor: Reactor) -> None:
    """Shrinking gpu-workers 4 → 1 starts a new RayCluster of 2 × 1 + 1 (head) + 3 × 8 = 27 GPUs beside the active
    one; the reactor used to charge the changed group's 2."""
    _ray_service(reactor)
    pod = "serve-a1b2c-gpu-workers-worker-00000"
    headroom(reactor, 26)
    outcome = post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 27 GPUs" in outcome["detail"], outcome
    assert "quota-exceeded" in plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
    headroom(reactor, 27)
    assert "would apply: resize-gpu ray-worker: 4 → 1" in plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
    assert post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)["result"] == "applied"


# --- C (item 9) and D (item 6): LeaderWorkerSet surge groups are whole; a partition is refused ---------------------

def _lws(reactor: Reactor, rolling: dict[str, Any]) -> dict[str, Any]:
    """2 groups of 4: a 4-GPU leader and 3 workers of 8 GPUs; the leader and worker StatefulSets as lws v0.10.0
    leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration and pod_controller.go
    constructWorkerStatefulSetApplyConfiguration build them (reconcile_lws)."""
    install_upstream(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    vllm_lws(reactor.sim, rolling)
    reconcile_lws(reactor.sim, "vllm")
    return custom(reactor.sim, "leaderworkersets", "vllm")


def test_an_lws_surge_group_is_charged_whole_leader_and_workers(reactor: Reactor) -> None:
    """maxSurge 1: a leader shrink 4 → 1 starts one surge group, its new leader (1 GPU) and its 3 workers of 8 GPUs
    (the worker StatefulSet every leader pod gets): 25 GPUs; the reactor used to charge the leader's 1."""
    _lws(reactor, {"maxSurge": 1, "maxUnavailable": 1})
    headroom(reactor, 24)
    outcome = post(reactor, "GPUUnderutilized", "vllm-0", "vllm-leader", value=0.1, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 25 GPUs" in outcome["detail"], outcome
    headroom(reactor, 25)
    assert "would apply: resize-gpu vllm-leader: 4 → 1" in plan(reactor, "GPUUnderutilized", "vllm-0",
                                                                  "vllm-leader", 0.1, 4)
    assert post(reactor, "GPUUnderutilized", "vllm-0", "vllm-leader", value=0.1, gpus=4)["result"] == "applied"


def test_an_lws_with_a_partition_refuses_a_template_change_by_name(reactor: Reactor) -> None:
    lws = _lws(reactor, {"maxSurge": 0, "maxUnavailable": 1, "partition": 1})
    text = plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "operator-forbids" in text and "partition is 1" in text, text
    outcome = post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)
    assert outcome["reason"] == "operator-forbids" and "groups 0–0 never get the change" in outcome["detail"]
    assert custom(reactor.sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


def test_an_lws_with_partition_zero_changes(reactor: Reactor) -> None:
    _lws(reactor, {"maxSurge": 0, "maxUnavailable": 1, "partition": 0})
    assert post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)["result"] == "applied"


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
                headroom(reactor, 100)  # the whole new RayCluster fits: what decides is the declaration
            before = custom(sim, "rayservices", "serve")["spec"]
            text = plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
            outcome = post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)
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

def _kueue_ray_cluster(reactor: Reactor, annotations: dict[str, str]) -> dict[str, Any]:
    """A RayCluster submitted to LocalQueue team-a (Kueue v0.19.2's real CRDs: v1beta2 served), KubeRay's pods made
    by reconcile_ray; the queue's objects as tests/adapters/test_kueue.py makes them."""
    sim = reactor.sim
    install_upstream(sim, "ray.io_rayclusters.yaml", *KUEUE_CRDS)
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
               "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                   {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 64}]}]}]}})
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}})
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": annotations,
                            "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
               "spec": {"rayVersion": "2.40.0",
                        "headGroupSpec": {"rayStartParams": {},
                                          "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                        "workerGroupSpecs": [ray_group("gpu-workers", 4, 2)]}})
    reconcile_ray(sim, "ray")
    return custom(sim, "rayclusters", "ray")


@pytest.mark.parametrize("annotations, expected", [
    ({}, "EquivalentToWorkload"), ({"kueue.x-k8s.io/elastic-job": "true"}, "ElasticJobsViaWorkloadSlices feature gate"),
], ids=["not-elastic", "elastic"])
def test_a_kueue_managed_raycluster_is_not_scaled(reactor: Reactor, annotations: dict[str, str],
                                                  expected: str) -> None:
    cluster = _kueue_ray_cluster(reactor, annotations)
    text = plan(reactor, "GPUIdle", RAY_WORKER, "ray-worker", 0.0, 4)
    assert "operator-forbids" in text and "head included" in text and expected in text, text
    outcome = post(reactor, "GPUIdle", RAY_WORKER, "ray-worker", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "suspend" in outcome["detail"], outcome
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]


# --- G (item 1): a Kueue-managed StatefulSet's priority label, by the Kueue release declared ----------------------

def _kueue_statefulset(sim: SimCluster, release: tuple[int, int, int]) -> None:
    """A StatefulSet submitted to LocalQueue team-a at WorkloadPriorityClass wpc-low (Kueue's real v0.19.2 CRDs: the
    API versions every release from v0.15 serves), its template as Kueue's webhook of `release` defaults it."""
    install_upstream(sim, *KUEUE_CRDS)
    kueue_queues(sim)
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "queued", "namespace": NAMESPACE,
                            "labels": {"app": "queued", "kueue.x-k8s.io/queue-name": "team-a",
                                       "kueue.x-k8s.io/priority-class": "wpc-low"}},
               "spec": {"replicas": 2, "serviceName": "", "selector": {"matchLabels": {"app": "queued"}},
                        "template": {"metadata": {"labels": {"app": "queued"}},
                                     "spec": {"containers": [container("server", 4)]}}}})
    sim.settle()
    kueue_statefulset_webhook(sim, "queued", release)


@pytest.mark.parametrize("declared, release, expected", [
    (None, (0, 16, 1), "adapters.kueueVersion"),
    ("v0.16.1", (0, 16, 1), ""),
    ("v0.15.5", (0, 15, 5), ""),
    ("v0.16.2", (0, 16, 2), "the change would change nothing"),
    ("v0.15.6", (0, 15, 6), "the change would change nothing"),
], ids=["undeclared", "v0.16.1", "v0.15.5", "v0.16.2", "v0.15.6"])
def test_a_kueue_statefulsets_priority_label_follows_the_declared_release(
        sim: SimCluster, token_file: Path, declared: str | None, release: tuple[int, int, int], expected: str) -> None:
    settings = make_settings(token_file, **{**POLICY, "priorityLadder": ["wpc-low", "wpc-high"]})
    kueue_version = None if declared is None else build_settings(
        {"adapters": {"kueueVersion": declared}}, {}).adapters_kueue_version
    reactor = build_reactor(sim, dataclasses.replace(settings, adapters_kueue_version=kueue_version))
    try:
        _kueue_statefulset(sim, release)
        pod = reactor.pods("queued")[0]
        text = plan(reactor, "GPUSaturated", pod, "server", 0.99, 4)
        outcome = post(reactor, "GPUSaturated", pod, "server", value=0.99, gpus=4)
        sts = sim.get("statefulsets", NAMESPACE, "queued")
        if expected:
            assert outcome["reason"] == "operator-forbids" and expected in outcome["detail"], outcome
            assert "operator-forbids" in text and "reconcileWorkload" in text, text
            assert sts["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-low"
            return
        assert "would apply: set-priority wpc-low → wpc-high" in text, text
        assert (outcome["result"], outcome["action"]) == ("applied", "set-priority"), outcome
        assert sts["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
        # The release's webhook copies the label into the template: every pod restarts with it (checked for quota
        # and surge as a template change).
        generation = sts["metadata"]["generation"]
        kueue_statefulset_webhook(sim, "queued", release)
        sts = sim.get("statefulsets", NAMESPACE, "queued")
        assert sts["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
        assert sts["metadata"]["generation"] == generation + 1
    finally:
        reactor.service.kube.close()


@pytest.mark.parametrize("raw", ["0.16", "v0.16.x", 16, True])
def test_a_kueue_release_not_spelled_as_one_is_refused_at_start(raw: Any) -> None:
    with pytest.raises(ConfigError, match="adapters.kueueVersion"):
        build_settings({"adapters": {"kueueVersion": raw}}, {})
    assert build_settings({"adapters": {"kueueVersion": "v0.15.6"}}, {}).adapters.kueue_version == (0, 15, 6)


# --- H (item 3): Kueue's priority label on an InferenceService rolls its model servers -----------------------------

def test_a_kueue_label_on_an_isvc_is_checked_as_the_rollout_it_is(kueue_reactor: Reactor) -> None:
    """The label reaches every predictor pod's template: 4 replicas, maxSurge 25% → one 4-GPU surge pod; with 3 GPUs
    of headroom the change is refused for quota (it used to be written unchecked), with 4 it applies and rolls."""
    reactor, sim = kueue_reactor, kueue_reactor.sim
    kueue_isvc(sim)
    pod = isvc_pods(sim)[0]
    headroom(reactor, 3)
    outcome = post(reactor, "GPUSaturated", pod, "kserve-container", value=0.99, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 4 GPUs" in outcome["detail"], outcome
    headroom(reactor, 4)
    assert "would apply: set-priority wpc-low → wpc-high" in plan(reactor, "GPUSaturated", pod, "kserve-container",
                                                                   0.99, 4)
    outcome = post(reactor, "GPUSaturated", pod, "kserve-container", value=0.99, gpus=4)
    assert (outcome["result"], outcome["action"]) == ("applied", "set-priority"), outcome
    generation = sim.get("deployments", NAMESPACE, "llama-predictor")["metadata"]["generation"]
    reconcile_isvc(sim, "llama")  # KServe copies the new label into the template: the Deployment rolls
    dep = sim.get("deployments", NAMESPACE, "llama-predictor")
    assert dep["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert dep["metadata"]["generation"] == generation + 1


def test_a_kueue_label_on_an_isvc_with_canaries_is_refused_as_a_template_change(kueue_reactor: Reactor) -> None:
    """spec.canary (kserve v0.20.0 canary_controller_test.go's shape): the label would roll the stable and the canary
    Deployments alike, which the reactor does not model — refused as a template change is, by name."""
    reactor, sim = kueue_reactor, kueue_reactor.sim
    kueue_isvc(sim, canary=[{"predictor": {"name": "v2", "containers": [container("kserve-container", 4)]},
                             "trafficPercent": 25}])
    pod = isvc_pods(sim)[0]
    text = plan(reactor, "GPUSaturated", pod, "kserve-container", 0.99, 4)
    assert "operator-forbids" in text and "buildObjectMeta" in text and "spec.canary: v2" in text, text
    outcome = post(reactor, "GPUSaturated", pod, "kserve-container", value=0.99, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "spec.canary: v2" in outcome["detail"], outcome
    labels = custom(sim, "inferenceservices", "llama")["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/priority-class"] == "wpc-low"


# --- I (items 7, 8): an InferenceService's replicas are what runs; the verifier follows the changed component -------

def _isvc(sim: SimCluster, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A raw-mode InferenceService, predictor minReplicas 1 (maxReplicas 4) of 4 GPUs, its Deployments as
    createRawDefaultDeployment builds them (reconcile_isvc)."""
    install_upstream(sim, "serving.kserve.io_inferenceservices.yaml")
    sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "llama", "namespace": NAMESPACE,
                            "annotations": {"serving.kserve.io/deploymentMode": "Standard", **(annotations or {})}},
               "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 4,
                                      "containers": [container("kserve-container", 4)]}, **spec}})
    reconcile_isvc(sim, "llama")
    return custom(sim, "inferenceservices", "llama")


def _autoscaled(sim: SimCluster, deployment: str, replicas: int) -> None:
    """KServe's HPA (hpa_reconciler.go createHPA: min/maxReplicas of the component) scales the Deployment: the
    HorizontalPodAutoscaler controller writes its replicas (the scale subresource); KServe's
    deployment_reconciler.go checkDeploymentExist then leaves them alone."""
    dep = sim.get("deployments", NAMESPACE, deployment)
    dep["spec"]["replicas"] = replicas
    sim.apply(dep)
    sim.settle()


def test_an_autoscaled_isvc_is_counted_as_it_runs_and_not_scaled(reactor: Reactor) -> None:
    """The HPA runs 4 predictor replicas over minReplicas 1: a 4 → 5 GPU raise rolls all 4 (4 GPUs more once
    rolled out) with one 5-GPU surge pod (25% of 4): 9 GPUs; counting minReplicas it asked 6."""
    sim = reactor.sim
    _isvc(sim)
    _autoscaled(sim, "llama-predictor", 4)
    pod = isvc_pods(sim)[0]
    headroom(reactor, 8)
    outcome = post(reactor, "GPUMemorySaturated", pod, "kserve-container", value=0.97, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 9 GPUs" in outcome["detail"], outcome
    text = plan(reactor, "GPUIdle", pod, "kserve-container", 0.0, 4)
    assert "operator-forbids" in text and "autoscaler runs 4 replicas" in text, text
    outcome = post(reactor, "GPUIdle", pod, "kserve-container", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "above its minReplicas 1" in outcome["detail"], outcome
    assert custom(sim, "inferenceservices", "llama")["spec"]["predictor"]["minReplicas"] == 1
    headroom(reactor, 9)
    assert post(reactor, "GPUMemorySaturated", pod, "kserve-container", value=0.97, gpus=4)["result"] == "applied"


def test_an_isvc_with_an_external_autoscaler_is_not_scaled(reactor: Reactor) -> None:
    sim = reactor.sim
    _isvc(sim, {"serving.kserve.io/autoscalerClass": "external"})
    pod = isvc_pods(sim)[0]
    text = plan(reactor, "GPUMemorySaturated", pod, "kserve-container", 0.97, 4)
    assert "would apply: resize-gpu" in text, text  # a template change still reaches the pods
    sim.apply({**custom(sim, "inferenceservices", "llama"), "spec": {
        "predictor": {"minReplicas": 2, "maxReplicas": 4, "containers": [container("kserve-container", 4)]}}})
    reconcile_isvc(sim, "llama")
    outcome = post(reactor, "GPUIdle", isvc_pods(sim)[0], "kserve-container", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "autoscalerClass is external" in outcome["detail"], outcome
    assert custom(sim, "inferenceservices", "llama")["spec"]["predictor"]["minReplicas"] == 2


def test_the_verifier_follows_the_changed_components_deployment(reactor: Reactor) -> None:
    """A predictor and an explainer, each its Deployment (llama-explainer listed first): the predictor's change is
    judged by llama-predictor's rollout, never the explainer's."""
    sim = reactor.sim
    isvc = _isvc(sim, explainer={"minReplicas": 1, "containers": [container("explainer", 0)]})
    view = ClusterView(adapters=Adapters((INFERENCE_SERVICE,)), gpu_resource=GPU, state_keys=None)
    listed = [d["metadata"]["name"] for d in sim.list("deployments", NAMESPACE)]
    assert listed.index("llama-explainer") < listed.index("llama-predictor"), listed
    child = view.child(isvc, "InferenceService", lambda kind, ns: sim.list("deployments", ns))
    assert child is not None and child["metadata"]["name"] == "llama-predictor"


def test_a_kueue_label_change_on_an_lws_is_charged_whole_surge_groups(kueue_reactor: Reactor) -> None:
    """Kueue's leaderworkerset_webhook.go Default copies the priority label into both templates, so the label rolls
    every group; with maxSurge 1 one whole surge group starts: 3 workers of 8 GPUs and a 4-GPU leader, 28 GPUs (the
    reactor used to charge the workers' 24)."""
    reactor, sim = kueue_reactor, kueue_reactor.sim
    install_upstream(sim, *KUEUE_CRDS)
    kueue_queues(sim)
    install_upstream(sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    vllm_lws(sim, {"maxSurge": 1, "maxUnavailable": 1}, labels=KUEUE_LABELS)
    reconcile_lws(sim, "vllm")
    headroom(reactor, 27)
    outcome = post(reactor, "GPUSaturated", "vllm-0-1", "vllm-worker", value=0.99, gpus=8)
    assert outcome["reason"] == "quota-exceeded" and "needs 28 GPUs" in outcome["detail"], outcome
    headroom(reactor, 28)
    assert "would apply: set-priority wpc-low → wpc-high" in plan(reactor, "GPUSaturated", "vllm-0-1", "vllm-worker",
                                                                   0.99, 8)
    outcome = post(reactor, "GPUSaturated", "vllm-0-1", "vllm-worker", value=0.99, gpus=8)
    assert (outcome["result"], outcome["action"]) == ("applied", "set-priority"), outcome
