"""Surge and quota as the operator will create pods, every template's pods in the quotas that count them; and a
serverless InferenceService's change judged by its own component's readiness. Each case on the operators' real CRDs
(../shared/crds), its objects built as the operator's own code builds them (tests/adapters/operators.py, the upstream
function named on each), and `reactor plan` on it showing the charge or the refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reactor.integrations.adapters.kserve import INFERENCE_SERVICE
from reactor_sim import SimCluster
from tests.adapters.operators import (
    GPU,
    container,
    custom,
    install_upstream,
    needs_shared,
    ray_service_cluster,
    ray_service_status,
    reconcile_isvc_serverless,
    reconcile_lws,
)
from tests.adapters.steps import headroom, plan, post
from tests.adapters.workloads import isvc_pods, kueue_isvc, ray_group, ray_service, vllm_lws
from tests.support import NAMESPACE, Reactor

pytestmark = needs_shared

HIGH, MEDIUM = "high-priority-gpu", "medium-priority-gpu"


def _scoped_quota(reactor: Reactor, cls: str, headroom: int) -> None:
    """A ResourceQuota `scoped-gpu` counting only pods of PriorityClass `cls` (scopeSelector PriorityClass In), its
    hard limit what those pods use now plus `headroom` (its status as the quota controller computes it)."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "scoped-gpu", "namespace": NAMESPACE},
             "spec": {"hard": {f"requests.{GPU}": "1000"},
                      "scopeSelector": {"matchExpressions": [
                          {"scopeName": "PriorityClass", "operator": "In", "values": [cls]}]}}}
    reactor.sim.apply(quota)
    reactor.sim.settle()
    found = reactor.sim.get("resourcequotas", NAMESPACE, "scoped-gpu")
    found["spec"]["hard"][f"requests.{GPU}"] = str(int(found["status"]["used"][f"requests.{GPU}"]) + headroom)
    reactor.sim.apply(found)
    reactor.sim.settle()


# --- LeaderWorkerSet: a surge group's leader falls in its own class's quotas --------------------------------------

def _lws(reactor: Reactor) -> None:
    """2 groups of 4, maxSurge 1: a 4-GPU leader of class high-priority-gpu and 3 workers of 8 GPUs of class
    medium-priority-gpu; the leader and worker StatefulSets and pods as lws v0.10.0
    leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration and pod_controller.go
    constructWorkerStatefulSetApplyConfiguration build them (reconcile_lws)."""
    install_upstream(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    vllm_lws(reactor.sim, {"maxSurge": 1, "maxUnavailable": 1}, leader_class=HIGH, worker_class=MEDIUM)
    reconcile_lws(reactor.sim, "vllm")


def test_an_lws_surge_leader_is_charged_to_the_quota_of_its_own_class(reactor: Reactor) -> None:
    """A worker shrink 8 → 2 starts one surge group: its 3 new workers (medium) and its leader (4 GPUs, high). A quota
    scoped to high-priority-gpu never counts a worker, yet it counts the surge leader (podMatchesScopeFunc reads the
    pod's own priorityClassName): with 3 GPUs of headroom there it is refused; the reactor used to skip that quota."""
    _lws(reactor)
    headroom(reactor, 100)
    _scoped_quota(reactor, HIGH, 3)
    outcome = post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)
    assert outcome["reason"] == "quota-exceeded", outcome
    assert "needs 4 GPUs of quota scoped-gpu" in outcome["detail"] and "other templates' pods 4" in outcome["detail"]
    text = plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "quota-exceeded" in text and "needs 4 GPUs of quota scoped-gpu" in text, text
    _scoped_quota(reactor, HIGH, 4)
    text = plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "would apply: resize-gpu vllm-worker: 8 → 2" in text, text
    assert post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", value=0.1, gpus=8)["result"] == "applied"


def test_the_changed_templates_class_quota_is_not_charged_the_other_templates_pods(reactor: Reactor) -> None:
    """The other way round: a quota scoped to medium-priority-gpu counts the workers and their surge, not the surge
    leader of class high (4 GPUs): 3 workers × 2 = 6 GPUs of it, which is all it needs."""
    _lws(reactor)
    headroom(reactor, 100)
    _scoped_quota(reactor, MEDIUM, 6)
    text = plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "would apply: resize-gpu vllm-worker: 8 → 2" in text, text


# --- RayService: the whole new RayCluster, each group in its own class's quotas -----------------------------------

def _ray_service(reactor: Reactor) -> None:
    """A RayService (upgradeStrategy NewCluster) whose RayCluster has a GPU-less head, `gpu-workers` (2 × 4 GPUs,
    medium-priority-gpu) and `big` (3 × 8 GPUs, high-priority-gpu); its active RayCluster as
    rayservice_controller.go constructRayClusterForRayService builds it (ray_service_cluster)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml", "ray.io_rayservices.yaml")
    ray_service(reactor.sim, [ray_group("gpu-workers", 4, 2, MEDIUM), ray_group("big", 8, 3, HIGH)])
    active = ray_service_cluster(reactor.sim, "serve", "a1b2c")
    ray_service_status(reactor.sim, "serve", active)


def test_a_rayservice_change_charges_each_new_group_to_its_own_class_quota(reactor: Reactor) -> None:
    """Shrinking gpu-workers (medium) 4 → 1 starts a whole new RayCluster: `big` (3 × 8 GPUs, high) starts again
    beside the active one. A quota scoped to high-priority-gpu counts those 24 GPUs though it never counts
    gpu-workers; the reactor used to skip it."""
    _ray_service(reactor)
    pod = "serve-a1b2c-gpu-workers-worker-00000"
    headroom(reactor, 100)
    _scoped_quota(reactor, HIGH, 23)
    outcome = post(reactor, "GPUUnderutilized", pod, "ray-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "quota-exceeded" and "needs 24 GPUs of quota scoped-gpu" in outcome["detail"], outcome
    assert "needs 24 GPUs of quota scoped-gpu" in plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)
    _scoped_quota(reactor, HIGH, 24)
    assert "would apply: resize-gpu ray-worker: 4 → 1" in plan(reactor, "GPUUnderutilized", pod, "ray-worker", 0.1, 4)


# --- Kueue's label on an InferenceService rolls every component -----------------------------------------------------

def _kueue_pipeline(sim: SimCluster) -> None:
    """A raw-mode InferenceService submitted to team-a at wpc-low: a predictor of 4 replicas × 4 GPUs and a
    transformer of 2 replicas × 2 GPUs, each a Deployment as KServe's createRawDefaultDeployment builds it
    (RollingUpdate 25%/25%; reconcile_isvc: the InferenceService's labels copied into each template by
    buildObjectMeta)."""
    kueue_isvc(sim, transformer={"minReplicas": 2, "maxReplicas": 2, "containers": [container("embedder", 2)]})


def _component_pods(sim: SimCluster, component: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector=f"component={component}"))


@pytest.mark.parametrize(("component", "pod_of", "name", "gpus"), [
    ("predictor", lambda sim: isvc_pods(sim)[0], "kserve-container", 4),
    ("transformer", lambda sim: _component_pods(sim, "transformer")[0], "embedder", 2),
], ids=["alert-on-predictor", "alert-on-transformer"])
def test_a_kueue_label_change_on_an_isvc_charges_every_components_surge(kueue_reactor: Reactor, component: str,
                                                                        pod_of: Any, name: str, gpus: int) -> None:
    """The label reaches every component's template, so both roll: the predictor's 25% of 4 replicas (one 4-GPU pod)
    and the transformer's 25% of 2 (one 2-GPU pod), 6 GPUs whichever component the alert names; the reactor used to
    charge the alerted component's surge only."""
    reactor, sim = kueue_reactor, kueue_reactor.sim
    _kueue_pipeline(sim)
    pod = pod_of(sim)
    headroom(reactor, 5)
    outcome = post(reactor, "GPUSaturated", pod, name, value=0.99, gpus=gpus)
    assert outcome["reason"] == "quota-exceeded" and "needs 6 GPUs" in outcome["detail"], outcome
    assert "needs 6 GPUs" in plan(reactor, "GPUSaturated", pod, name, 0.99, gpus)
    headroom(reactor, 6)
    assert "would apply: set-priority wpc-low → wpc-high" in plan(reactor, "GPUSaturated", pod, name, 0.99, gpus)
    outcome = post(reactor, "GPUSaturated", pod, name, value=0.99, gpus=gpus)
    assert (outcome["result"], outcome["action"]) == ("applied", "set-priority"), outcome


def _ksvc(name: str) -> dict[str, Any]:
    return {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": name, "labels": {}}}


def test_a_serverless_label_change_charges_each_components_whole_new_revision() -> None:
    """Serverless (status.deploymentMode Knative): KServe's Knative Service for each component gets the label
    (ksvc_reconciler.go createKnativeService), so each starts a new Revision at its full count beside the old one."""
    isvc = {"metadata": {"name": "llama"}, "status": {"deploymentMode": "Knative"},
            "spec": {"predictor": {"minReplicas": 4, "containers": [container("kserve-container", 4)]},
                     "transformer": {"minReplicas": 2, "containers": [container("embedder", 2)]},
                     "explainer": {"containers": [container("explainer", 0)]}}}
    predictor = INFERENCE_SERVICE.part(isvc, "predictor")
    assert predictor is not None
    beside = INFERENCE_SERVICE.label_beside(isvc, predictor, 4, child=_ksvc("llama-predictor"))
    assert [(p.name, n) for p, n in beside] == [("transformer", 2), ("explainer", 1)]


def test_a_component_with_its_own_deployment_strategy_surges_by_it() -> None:
    """Raw mode: a component's deploymentStrategy takes precedence over the configured default
    (deployment_reconciler.go createRawDefaultDeployment); with none of its own, it gets the same default the read
    component's Deployment shows; where neither can be read, every replica (apps/v1 DeploymentStrategy arithmetic:
    maxSurge of replicas, percentages rounded up)."""
    isvc = {"metadata": {"name": "llama"}, "status": {"deploymentMode": "Standard"},
            "spec": {"predictor": {"minReplicas": 4, "containers": [container("kserve-container", 4)]},
                     "transformer": {"minReplicas": 4, "containers": [container("embedder", 2)],
                                     "deploymentStrategy": {"type": "RollingUpdate",
                                                            "rollingUpdate": {"maxSurge": 3}}},
                     "explainer": {"minReplicas": 4, "containers": [container("explainer", 1)]}}}
    predictor = INFERENCE_SERVICE.part(isvc, "predictor")
    assert predictor is not None
    dep = {"kind": "Deployment", "metadata": {"labels": {"component": "predictor"}},
           "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}}}
    assert [(p.name, n) for p, n in INFERENCE_SERVICE.label_beside(isvc, predictor, 1, child=dep)] == \
        [("transformer", 3), ("explainer", 2)]
    assert [(p.name, n) for p, n in INFERENCE_SERVICE.label_beside(isvc, predictor, 1, child=None)] == \
        [("transformer", 3), ("explainer", 4)]
    # The mode not known (no status yet, no annotation) and nothing read: a serverless component ignores
    # deploymentStrategy and starts every replica, so that is what is counted.
    unknown = {**isvc, "status": {}}
    assert [(p.name, n) for p, n in INFERENCE_SERVICE.label_beside(unknown, predictor, 1, child=None)] == \
        [("transformer", 4), ("explainer", 4)]


# --- Serverless InferenceService: the verifier judges the changed component ------------------------------------------

@pytest.fixture
def pipeline(reactor: Reactor) -> dict[str, Any]:
    """A serverless predictor (4 GPUs, min 2) and an explainer (no GPU), each a Knative Service with Knative's
    Configuration, Revision and Deployment below (reconcile_isvc_serverless)."""
    install_upstream(reactor.sim, "serving.kserve.io_inferenceservices.yaml", "serving.knative.dev_services.yaml",
                     "serving.knative.dev_configurations.yaml", "serving.knative.dev_revisions.yaml")
    gpus = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "llama", "namespace": NAMESPACE},
                       "spec": {"predictor": {"minReplicas": 2, "maxReplicas": 4, "priorityClassName": MEDIUM,
                                              "model": {"modelFormat": {"name": "huggingface"},
                                                        "storageUri": "hf://meta-llama/Llama-3.1-8B",
                                                        "resources": gpus}},
                                "explainer": {"minReplicas": 1, "containers": [container("explainer", 0)]}}})
    reconcile_isvc_serverless(reactor.sim, "llama")
    # The verifier's Lease lives in the reactor's own namespace (verify.leaseName; deploy/base).
    reactor.sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-reactor"}})
    return custom(reactor.sim, "inferenceservices", "llama")


def _verification(reactor: Reactor) -> dict[str, Any]:
    lease = reactor.sim.get("leases", NAMESPACE, "llama.gpu-reactor")
    return dict(json.loads(lease["metadata"]["annotations"]["gpu-reactor.io/verification"]))


def _predictor_pods(reactor: Reactor) -> list[str]:
    pods = reactor.sim.list("pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=llama,"
                                                               "component=predictor")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def test_a_rolled_out_predictor_is_verified_though_the_explainer_is_down(reactor: Reactor,
                                                                         pipeline: dict[str, Any]) -> None:
    """The predictor's new Revision is ready (PredictorReady True, latestCreatedRevision = latestReadyRevision) while
    the explainer's is not: KServe's IngressReady, and so `Ready`, is False for the explainer (createIngress), which
    says nothing of the predictor's change. The verifier marks it verified; it used to wait on `Ready` and revert."""
    assert reactor.service.verifier is not None
    pod = _predictor_pods(reactor)[0]
    outcome = post(reactor, "GPUUnderutilized", pod, "kserve-container", value=0.1, gpus=4)
    assert outcome["result"] == "applied", outcome
    reconcile_isvc_serverless(reactor.sim, "llama", not_ready=("explainer",))
    status = custom(reactor.sim, "inferenceservices", "llama")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PredictorReady": "True", "ExplainerReady": "False", "IngressReady": "False", "Ready": "False"}
    assert status["components"]["predictor"]["latestCreatedRevision"] == "llama-predictor-00002"
    reactor.service.verifier.check_all()
    assert _verification(reactor)["result"] == "verified", _verification(reactor)


def test_a_predictor_whose_new_revision_is_not_ready_is_not_verified(reactor: Reactor,
                                                                     pipeline: dict[str, Any]) -> None:
    """Its newest Revision created and not ready: the change is followed, neither verified nor reverted yet."""
    assert reactor.service.verifier is not None
    pod = _predictor_pods(reactor)[0]
    assert post(reactor, "GPUUnderutilized", pod, "kserve-container", value=0.1, gpus=4)["result"] == "applied"
    reconcile_isvc_serverless(reactor.sim, "llama", not_ready=("predictor",))
    reactor.service.verifier.check_all()
    assert _verification(reactor)["result"] == "pending", _verification(reactor)
    reconcile_isvc_serverless(reactor.sim, "llama")
    reactor.service.verifier.check_all()
    assert _verification(reactor)["result"] == "verified", _verification(reactor)


def test_a_transformer_change_is_judged_by_the_transformer_not_by_ready() -> None:
    """The transformer's own condition and revisions (kserve inference_service_status.go PropagateStatus): a
    transformer whose new Revision is not ready is a rollout in progress; one that is ready is done, whatever the
    explainer says."""
    def isvc(transformer_ready: bool) -> dict[str, Any]:
        created = "llama-transformer-00002"
        return {"metadata": {"name": "llama", "generation": 2},
                "spec": {"predictor": {"containers": [container("kserve-container", 4)]},
                         "transformer": {"containers": [container("embedder", 1)]},
                         "explainer": {"containers": [container("explainer", 0)]}},
                "status": {"deploymentMode": "Knative",
                           "components": {"transformer": {
                               "latestCreatedRevision": created,
                               "latestReadyRevision": created if transformer_ready else "llama-transformer-00001"}},
                           "conditions": [{"type": "TransformerReady",
                                           "status": "True" if transformer_ready else "Unknown"},
                                          {"type": "ExplainerReady", "status": "False"},
                                          {"type": "Ready", "status": "False"}]}}
    behind = INFERENCE_SERVICE.part_rollout(isvc(False), "transformer", None)
    assert "Revision llama-transformer-00002 is not ready" in behind, behind
    assert INFERENCE_SERVICE.part_rollout(isvc(True), "transformer", None) == ""
    assert INFERENCE_SERVICE.rollout(isvc(True), None).startswith("Ready is False")  # what was read before
