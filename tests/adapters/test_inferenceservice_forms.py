"""KServe v0.20.0 InferenceService forms beyond a predictor `model` with its own GPUs (issue 24, item 6), on the
real InferenceService CRD (../shared/crds): where KServe reads the predictor's container (`model`, a framework field,
a custom `containers` list: pkg/apis/serving/v1beta1/predictor.go GetImplementations), and what KServe would not
carry to the pods the way the plan says, refused by name (`operator-forbids`) and never written: GPUs that come from
the ServingRuntime, a multi-node predictor, canaries (`spec.canary` in Standard mode, `canaryTrafficPercent` in
Knative mode). Children are built as KServe's code builds them (tests/adapters/operators.py, each function naming
its upstream file and function)."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from tests.adapters.operators import (
    GPU,
    ISVC_LABEL,
    KNATIVE,
    custom,
    install,
    install_upstream,
    needs_shared,
    owner_ref,
    reconcile_isvc,
    reconcile_isvc_serverless,
)
from tests.support import NAMESPACE, Reactor

pytestmark = needs_shared
ISVC = f"InferenceService/{NAMESPACE}/llama"
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "lightgbm", "paddle",
              "pmml")


def _gpus(n: int) -> dict[str, Any]:
    return {"limits": {GPU: str(n)}, "requests": {GPU: str(n)}}


def _apply(reactor: Reactor, predictor: dict[str, Any], *, annotations: dict[str, str] | None = None,
           **spec: Any) -> None:
    install_upstream(reactor.sim, "serving.kserve.io_inferenceservices.yaml")
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "llama", "namespace": NAMESPACE, "annotations": annotations or {}},
                       "spec": {"predictor": {"minReplicas": 2, "maxReplicas": 4,
                                              "priorityClassName": "medium-priority-gpu", **predictor}, **spec}})


def _pods(reactor: Reactor, deployment: str | None = None) -> list[str]:
    pods = reactor.sim.list("pods", NAMESPACE, label_selector=f"{ISVC_LABEL}=llama,component=predictor")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")
                  and (deployment is None or p["metadata"]["name"].startswith(f"{deployment}-")))


def _post(reactor: Reactor, name: str, pods: list[str], container: str = "kserve-container",
          **kw: Any) -> list[dict[str, Any]]:
    assert pods, "the predictor has pods"
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, container, **kw) for pod in pods]))
    assert r.status_code == 200, r.get_json()
    outcomes: list[dict[str, Any]] = r.get_json()["outcomes"]
    return outcomes


def _why(outcomes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(o["result"], o.get("reason"), o.get("detail")) for o in outcomes]


def _predictor(reactor: Reactor) -> dict[str, Any]:
    predictor: dict[str, Any] = custom(reactor.sim, "inferenceservices", "llama")["spec"]["predictor"]
    return predictor


def _template_gpus(reactor: Reactor, deployment: str, container: str = "kserve-container") -> str:
    dep = reactor.sim.get("deployments", NAMESPACE, deployment)
    (found,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == container]
    return str(found["resources"]["limits"][GPU])


def _refused_unwritten(reactor: Reactor, outcomes: list[dict[str, Any]], *needles: str) -> None:
    assert {o["reason"] for o in outcomes} == {"operator-forbids"}, _why(outcomes)
    for needle in needles:
        assert all(needle in o["detail"] for o in outcomes), _why(outcomes)
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


# --- where KServe reads the predictor's container ----------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_framework_field_is_resized_where_kserve_reads_it(reactor: Reactor, framework: str) -> None:
    """A framework field stored as is (KServe's defaulting webhook, setPredictorModelDefaults, moves it into `model`
    on write; where it did not run): buildPredictorResources runs the framework's own container (GetContainer), so
    its `resources` are what reach kserve-container."""
    _apply(reactor, {framework: {"storageUri": "gs://models/iris", "resources": _gpus(2)}})
    reconcile_isvc(reactor.sim, "llama")
    outcomes = _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=2)
    assert {(o["result"], o["workload"]) for o in outcomes} == {("applied", ISVC)}, _why(outcomes)
    predictor = _predictor(reactor)
    assert predictor[framework]["resources"] == _gpus(1)
    assert predictor[framework]["storageUri"] == "gs://models/iris"
    assert "model" not in predictor and "containers" not in predictor
    reconcile_isvc(reactor.sim, "llama")
    assert _template_gpus(reactor, "llama-predictor") == "1"


def test_a_framework_field_kserves_webhook_moved_into_model_is_resized_there(reactor: Reactor) -> None:
    """kserve v0.20.0 inference_service_defaults.go assignSKLearnRuntime: what a user writes as `sklearn` is stored
    as `model` with modelFormat sklearn (the framework field removed) and the model-format annotation."""
    _apply(reactor, {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "gs://models/iris",
                               "resources": _gpus(2)}},
           annotations={"serving.kserve.io/model-format": "sklearn"})
    reconcile_isvc(reactor.sim, "llama")
    assert {o["result"] for o in _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=2)} == {"applied"}
    assert _predictor(reactor)["model"]["resources"] == _gpus(1)


def test_a_custom_predictor_is_resized_in_its_containers(reactor: Reactor) -> None:
    """GetImplementations: no framework field and no `model`: the container named kserve-container (else the
    first) is the predictor, run as written."""
    _apply(reactor, {"containers": [{"name": "kserve-container", "image": "registry.example.com/llm:1",
                                     "resources": _gpus(4)}]})
    reconcile_isvc(reactor.sim, "llama")
    assert {o["result"] for o in _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=4)} == {"applied"}
    assert _predictor(reactor)["containers"][0]["resources"] == _gpus(1)


def test_two_implementations_are_refused_by_name(reactor: Reactor) -> None:
    _apply(reactor, {"sklearn": {"storageUri": "gs://a", "resources": _gpus(2)},
                     "model": {"modelFormat": {"name": "sklearn"}, "resources": _gpus(2)}})
    reconcile_isvc(reactor.sim, "llama")
    outcomes = _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=2)
    _refused_unwritten(reactor, outcomes, "validateExactlyOneImplementation")


# --- GPUs that come from the ServingRuntime ------------------------------------------------------------------------

VLLM = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
        "metadata": {"name": "vllm-runtime", "namespace": NAMESPACE},
        "spec": {"supportedModelFormats": [{"name": "huggingface", "autoSelect": True}],
                 "containers": [{"name": "kserve-container", "image": "kserve/huggingfaceserver:v0.20.0-gpu",
                                 "resources": _gpus(2)}]}}


def test_gpus_set_only_in_the_serving_runtime_are_refused_by_name(reactor: Reactor) -> None:
    """MergeRuntimeContainers merges the runtime's kserve-container under the model's: the pods run the runtime's
    2 GPUs while the InferenceService names none. Writing one there would override the runtime's for good."""
    _apply(reactor, {"model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://meta-llama/Llama-3.1-8B"}})
    reconcile_isvc(reactor.sim, "llama", runtime=VLLM)
    assert _template_gpus(reactor, "llama-predictor") == "2", "the pods' GPUs are the runtime's"
    for alert, value in (("GPUMemorySaturated", 0.97), ("GPUUnderutilized", 0.1)):
        outcomes = _post(reactor, alert, _pods(reactor), value=value, gpus=2)
        assert {o["result"] for o in outcomes} != {"applied"}, _why(outcomes)
        assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0
    refused = _post(reactor, "GPUMemorySaturated", _pods(reactor), value=0.97, gpus=2)
    _refused_unwritten(reactor, refused, "ServingRuntime vllm-runtime", "change them there")
    assert "resources" not in _predictor(reactor)["model"]


def test_a_runtime_gpu_declared_on_the_predictor_too_is_resized(reactor: Reactor) -> None:
    """The InferenceService's value wins the merge: declared there, the reactor's write reaches the pods."""
    _apply(reactor, {"model": {"modelFormat": {"name": "huggingface"}, "resources": _gpus(4)}})
    reconcile_isvc(reactor.sim, "llama", runtime=VLLM)
    assert _template_gpus(reactor, "llama-predictor") == "4"
    assert {o["result"] for o in _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=4)} == {"applied"}
    reconcile_isvc(reactor.sim, "llama", runtime=VLLM)
    assert _template_gpus(reactor, "llama-predictor") == "1"


def test_runtime_gpus_leave_replicas_and_priority_to_the_reactor(reactor: Reactor) -> None:
    _apply(reactor, {"model": {"modelFormat": {"name": "huggingface"}}})
    reconcile_isvc(reactor.sim, "llama", runtime=VLLM)
    assert {o["result"] for o in _post(reactor, "GPUIdle", _pods(reactor), value=0.0, gpus=2)} == {"applied"}
    assert _predictor(reactor)["minReplicas"] == 1


# --- multi-node predictors -----------------------------------------------------------------------------------------

def test_a_multi_node_predictor_is_refused_on_its_head_and_its_workers(reactor: Reactor) -> None:
    """createRawDeployment sets the head's and the workers' GPUs from tensorParallelSize and the workers' replicas
    from pipelineParallelSize: no change the reactor makes lands as planned. The workers' Deployment
    `llama-predictor-worker` is KServe's (PredictorWorkerServiceName), so its pods get the same reason."""
    _apply(reactor, {"minReplicas": 1, "maxReplicas": 1,
                     "model": {"modelFormat": {"name": "huggingface"}, "resources": _gpus(2)},
                     "workerSpec": {"tensorParallelSize": 2, "pipelineParallelSize": 3,
                                    "containers": [{"name": "worker-container", "image": "kserve/vllm:1"}]}})
    reconcile_isvc(reactor.sim, "llama")
    workers = _pods(reactor, "llama-predictor-worker")
    assert len(workers) == 2 and _template_gpus(reactor, "llama-predictor-worker", "worker-container") == "2"
    head = [p for p in _pods(reactor) if p not in workers]
    for alert, value in (("GPUUnderutilized", 0.1), ("GPUMemorySaturated", 0.97), ("GPUSaturated", 0.99)):
        _refused_unwritten(reactor, _post(reactor, alert, head, value=value, gpus=2), "multi-node predictor")
        _refused_unwritten(reactor, _post(reactor, alert, workers, "worker-container", value=value, gpus=2),
                           "multi-node predictor")


# --- canaries ------------------------------------------------------------------------------------------------------

def test_a_predictor_with_canaries_is_refused_on_stable_and_canary_pods(reactor: Reactor) -> None:
    """Standard mode `spec.canary` (the shape of kserve v0.20.0 canary_controller_test.go "Should create separate
    Deployments for stable and canary"): reconcileCanaryDeployments builds `llama-v2-predictor` from the stable
    predictor merged with the canary's (buildCanaryPredictor: the GPUs the canary does not set are the stable's) with
    canaryReplicaCount replicas (ceil(4 × 25%) = 1), and the stable Deployment runs 4 − 1. A predictor change would
    change the canary too: refused, whichever pod fires."""
    _apply(reactor, {"minReplicas": 4, "maxReplicas": 4,
                     "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://org/model-v1",
                               "resources": _gpus(4)}},
           annotations={"serving.kserve.io/deploymentMode": "Standard"},
           # as canary_controller_test.go makeCanary builds it (the inline Container's `name` marshals as "")
           canary=[{"predictor": {"name": "v2", "model": {"name": "", "modelFormat": {"name": "huggingface"},
                                                           "storageUri": "hf://org/model-v2"}},
                    "trafficPercent": 25}])
    reconcile_isvc(reactor.sim, "llama")
    canary = _pods(reactor, "llama-v2-predictor")
    stable = _pods(reactor, "llama-predictor")
    assert (len(stable), len(canary)) == (3, 1)
    assert _template_gpus(reactor, "llama-v2-predictor") == "4", "the canary takes the stable predictor's GPUs"
    for pods in (stable, canary):
        for alert, value in (("GPUUnderutilized", 0.1), ("GPUIdle", 0.0)):
            _refused_unwritten(reactor, _post(reactor, alert, pods, value=value, gpus=4), "spec.canary: v2")


def test_a_canary_deployment_the_resource_does_not_list_is_not_believed(reactor: Reactor) -> None:
    _apply(reactor, {"model": {"modelFormat": {"name": "huggingface"}, "resources": _gpus(4)}},
           annotations={"serving.kserve.io/deploymentMode": "Standard"})
    reconcile_isvc(reactor.sim, "llama")
    dep = reactor.sim.get("deployments", NAMESPACE, "llama-predictor")
    fake = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llama-v3-predictor", "namespace": NAMESPACE,
                         "labels": dep["metadata"]["labels"],
                         "ownerReferences": owner_ref(custom(reactor.sim, "inferenceservices", "llama"))},
            "spec": {**dep["spec"], "replicas": 1}}
    reactor.sim.apply(fake)
    reactor.sim.settle()
    outcomes = _post(reactor, "GPUUnderutilized", _pods(reactor, "llama-v3-predictor"), value=0.1, gpus=4)
    assert {o["reason"] for o in outcomes} == {"owner-unverified"}, _why(outcomes)
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


def _serverless(reactor: Reactor, percent: int | None, mode: str = "") -> None:
    install(reactor.sim, "serving.knative.dev.yaml")
    extra = {} if percent is None else {"canaryTrafficPercent": percent}
    _apply(reactor, {"model": {"modelFormat": {"name": "huggingface"}, "resources": _gpus(4)}, **extra},
           annotations={"serving.kserve.io/deploymentMode": mode} if mode else None)


def test_a_serverless_canary_split_is_refused_by_name(reactor: Reactor) -> None:
    """Knative mode: once revision 00001 has rolled out, NewKsvcReconciler routes canaryTrafficPercent to the newest
    revision and the rest to the last rolled-out one, which keeps its pods and its old template. A change would
    reach only the canary while both hold GPUs."""
    _serverless(reactor, 20)
    reconcile_isvc_serverless(reactor.sim, "llama")
    rolled = custom(reactor.sim, "inferenceservices", "llama")["status"]["components"]["predictor"]
    assert rolled["latestRolledoutRevision"] == "llama-predictor-00001"
    outcomes = _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=4)
    _refused_unwritten(reactor, outcomes, "canaryTrafficPercent 20", "llama-predictor-00001")
    # Someone else's change splits the traffic: the old revision keeps serving (and its pods) beside the new one.
    isvc = custom(reactor.sim, "inferenceservices", "llama")
    isvc["spec"]["predictor"]["model"]["storageUri"] = "hf://org/model-v2"
    reactor.sim.apply(isvc)
    reconcile_isvc_serverless(reactor.sim, "llama")
    ksvc = reactor.sim.get(f"services.{KNATIVE}", NAMESPACE, "llama-predictor")
    assert ksvc["spec"]["traffic"] == [{"latestRevision": True, "percent": 20},
                                       {"revisionName": "llama-predictor-00001", "latestRevision": False,
                                        "percent": 80, "tag": "prev"}]
    old = reactor.sim.get("deployments", NAMESPACE, "llama-predictor-00001-deployment")
    assert old["spec"]["replicas"] == 2, "the previous revision keeps serving its share"
    assert custom(reactor.sim, "inferenceservices", "llama")["status"]["components"]["predictor"][
        "latestRolledoutRevision"] == "llama-predictor-00001"


@pytest.mark.parametrize(("percent", "mode"), [(100, ""), (20, "Standard")])
def test_a_canary_percent_kserve_does_not_split_on_is_acted_on(reactor: Reactor, percent: int, mode: str) -> None:
    """canaryTrafficPercent 100 routes everything to the new revision (a plain rollout); in Standard mode KServe
    never reads the field (only ksvc_reconciler.go does)."""
    _serverless(reactor, percent, mode)
    if mode == "Standard":
        reconcile_isvc(reactor.sim, "llama")
    else:
        reconcile_isvc_serverless(reactor.sim, "llama")
    outcomes = _post(reactor, "GPUUnderutilized", _pods(reactor), value=0.1, gpus=4)
    assert {(o["result"], o["workload"]) for o in outcomes} == {("applied", ISVC)}, _why(outcomes)
    assert _predictor(reactor)["model"]["resources"] == _gpus(1)
