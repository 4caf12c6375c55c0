"""KServe InferenceService v1beta1 (raw deployment mode) over HTTP with the CRD installed (issue 17).

Pods → ReplicaSet → Deployment `<isvc>-predictor` → InferenceService: the reactor changes the predictor
(its `model.resources`, its containers, `minReplicas`, `priorityClassName`), never the Deployment KServe owns.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from tests.adapters.operators import GPU, custom, install, reconcile_isvc, set_status
from tests.support import NAMESPACE, Reactor


@pytest.fixture
def isvc(reactor: Reactor) -> dict[str, Any]:
    install(reactor.sim, "serving.kserve.io_inferenceservices.yaml")
    gpus = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "llama", "namespace": NAMESPACE},
                       "spec": {"predictor": {"minReplicas": 2, "maxReplicas": 4,
                                              "priorityClassName": "medium-priority-gpu",
                                              "model": {"modelFormat": {"name": "huggingface"},
                                                        "storageUri": "hf://meta-llama/Llama-3.1-8B",
                                                        "resources": gpus}}}})
    reconcile_isvc(reactor.sim, "llama")
    return custom(reactor.sim, "inferenceservices", "llama")


def _pods(reactor: Reactor) -> list[str]:
    pods = reactor.sim.list("pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=llama")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def _post(reactor: Reactor, name: str, *, status: str = "firing", pods: list[str] | None = None,
          **kw: Any) -> list[dict[str, Any]]:
    pods = pods or _pods(reactor)
    specs = [AlertSpec(name, NAMESPACE, pod, "kserve-container", status=status, **kw) for pod in pods]
    assert specs, "the predictor has pods"
    r = reactor.post(notification(specs))
    assert r.status_code == 200, r.get_json()
    return r.get_json()["outcomes"]


def _predictor(reactor: Reactor) -> dict[str, Any]:
    return custom(reactor.sim, "inferenceservices", "llama")["spec"]["predictor"]


def test_an_underused_predictor_shrinks_its_model_resources(reactor: Reactor, isvc: dict[str, Any]) -> None:
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {(o["result"], o["workload"]) for o in outcomes} == {("applied", f"InferenceService/{NAMESPACE}/llama")}
    predictor = _predictor(reactor)
    assert predictor["model"]["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
    assert predictor["model"]["storageUri"] == "hf://meta-llama/Llama-3.1-8B"
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 1
    assert reactor.sim.requests[("patch", "deployments", "")] == 0


def test_an_idle_predictor_scales_its_min_replicas_down(reactor: Reactor, isvc: dict[str, Any]) -> None:
    outcomes = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, [(o.get("reason"), o.get("detail")) for o in outcomes]
    assert _predictor(reactor)["minReplicas"] == 1
    assert _predictor(reactor)["maxReplicas"] == 4


def test_a_saturated_predictor_grows_and_the_resolve_reverts_it(reactor: Reactor, isvc: dict[str, Any]) -> None:
    firing = _pods(reactor)
    assert {o["result"] for o in _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)} == {"applied"}
    assert int(_predictor(reactor)["model"]["resources"]["limits"][GPU]) > 4
    reconcile_isvc(reactor.sim, "llama")
    assert not set(firing) & set(_pods(reactor)), "KServe's rollout replaced the pods that fired"
    outcomes = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved", pods=firing)
    why = [(o.get("reason"), o.get("detail")) for o in outcomes]
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "revert")}, why
    assert _predictor(reactor)["model"]["resources"]["limits"][GPU] == "4"


def test_a_starved_predictor_moves_up_the_ladder(reactor: Reactor, isvc: dict[str, Any]) -> None:
    assert {o["result"] for o in _post(reactor, "GPUSaturated", value=0.99, gpus=4)} == {"applied"}
    assert _predictor(reactor)["priorityClassName"] == "high-priority-gpu"


def test_a_predictor_kserve_has_not_made_ready_is_left_alone(reactor: Reactor, isvc: dict[str, Any]) -> None:
    set_status(reactor.sim, "inferenceservices", "llama",
               {"conditions": [{"type": "Ready", "status": "False", "reason": "PredictorNotReady",
                                "message": "revision rolling out"}]})
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {o["reason"] for o in outcomes} == {"rollout-in-progress"}
    assert "PredictorNotReady" in outcomes[0]["detail"]
    assert _predictor(reactor)["model"]["resources"]["limits"][GPU] == "4"


@pytest.fixture
def pipeline(reactor: Reactor) -> dict[str, Any]:
    """A predictor with a GPU transformer (pre-processing on a GPU) and a GPU explainer, each its own Deployment."""
    install(reactor.sim, "serving.kserve.io_inferenceservices.yaml")

    def component(container: str, gpus: int) -> dict[str, Any]:
        return {"minReplicas": 2, "maxReplicas": 3, "priorityClassName": "medium-priority-gpu",
                "containers": [{"name": container, "image": "registry.example.com/isvc:1",
                                "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}]}
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "rag", "namespace": NAMESPACE},
                       "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                                                        "resources": {"limits": {GPU: "1"}, "requests": {GPU: "1"}}}},
                                "transformer": component("embedder", 2), "explainer": component("explainer", 4)}})
    reconcile_isvc(reactor.sim, "rag")
    return custom(reactor.sim, "inferenceservices", "rag")


def _component_post(reactor: Reactor, component: str, container: str, name: str, *, status: str = "firing",
                    pods: list[str] | None = None, **kw: Any) -> list[dict[str, Any]]:
    pods = pods or sorted(p["metadata"]["name"] for p in reactor.sim.list(
        "pods", NAMESPACE, label_selector=f"serving.kserve.io/inferenceservice=rag,component={component}")
        if not p["metadata"].get("deletionTimestamp"))
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, container, status=status, **kw) for pod in pods]))
    assert r.status_code == 200, r.get_json()
    return r.get_json()["outcomes"]


def _spec(reactor: Reactor) -> dict[str, Any]:
    return custom(reactor.sim, "inferenceservices", "rag")["spec"]


def _limit(component: dict[str, Any]) -> str:
    return component["containers"][0]["resources"]["limits"][GPU]


def test_an_underused_transformer_shrinks_and_the_predictor_and_explainer_stay(reactor: Reactor,
                                                                             pipeline: dict[str, Any]) -> None:
    outcomes = _component_post(reactor, "transformer", "embedder", "GPUUnderutilized", value=0.1, gpus=2)
    assert {(o["result"], o["workload"]) for o in outcomes} == {("applied", f"InferenceService/{NAMESPACE}/rag")}
    spec = _spec(reactor)
    assert _limit(spec["transformer"]) == "1"
    assert spec["predictor"] == pipeline["spec"]["predictor"] and spec["explainer"] == pipeline["spec"]["explainer"]
    assert reactor.sim.requests[("patch", "deployments", "")] == 0


def test_an_idle_explainer_scales_its_min_replicas_down(reactor: Reactor, pipeline: dict[str, Any]) -> None:
    outcomes = _component_post(reactor, "explainer", "explainer", "GPUIdle", value=0.0, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, [(o.get("reason"), o.get("detail")) for o in outcomes]
    spec = _spec(reactor)
    assert (spec["explainer"]["minReplicas"], spec["transformer"]["minReplicas"]) == (1, 2)


def test_a_saturated_explainer_grows_then_reverts(reactor: Reactor, pipeline: dict[str, Any]) -> None:
    firing = [p["metadata"]["name"] for p in reactor.sim.list(
        "pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=rag,component=explainer")]
    grown = _component_post(reactor, "explainer", "explainer", "GPUMemorySaturated", value=0.97, gpus=4)
    assert {o["result"] for o in grown} == {"applied"}, [(o.get("reason"), o.get("detail")) for o in grown]
    assert int(_limit(_spec(reactor)["explainer"])) > 4
    reconcile_isvc(reactor.sim, "rag")
    outcomes = _component_post(reactor, "explainer", "explainer", "GPUMemorySaturated", value=0.97, gpus=4,
                               status="resolved", pods=firing)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "revert")}, outcomes
    assert _limit(_spec(reactor)["explainer"]) == "4"


def test_a_starved_transformer_moves_up_the_ladder(reactor: Reactor, pipeline: dict[str, Any]) -> None:
    outcomes = _component_post(reactor, "transformer", "embedder", "GPUSaturated", value=0.99, gpus=2)
    assert {o["result"] for o in outcomes} == {"applied"}
    spec = _spec(reactor)
    assert spec["transformer"]["priorityClassName"] == "high-priority-gpu"
    assert spec["explainer"]["priorityClassName"] == "medium-priority-gpu"


def test_a_transformer_kserve_has_not_made_ready_is_left_alone(reactor: Reactor, pipeline: dict[str, Any]) -> None:
    set_status(reactor.sim, "inferenceservices", "rag",
               {"conditions": [{"type": "Ready", "status": "False", "reason": "TransformerNotReady"}]})
    outcomes = _component_post(reactor, "transformer", "embedder", "GPUUnderutilized", value=0.1, gpus=2)
    assert {o["reason"] for o in outcomes} == {"rollout-in-progress"}
    assert _limit(_spec(reactor)["transformer"]) == "2"
