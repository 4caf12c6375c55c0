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
