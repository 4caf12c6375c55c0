"""KServe InferenceService v1beta1 (raw deployment mode) over HTTP with the CRD installed (issue 17).

Pods → ReplicaSet → Deployment `<isvc>-predictor` → InferenceService: the reactor changes the predictor
(its `model.resources`, its containers, `minReplicas`, `priorityClassName`), never the Deployment KServe owns.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from tests.adapters.operators import GPU, custom, install, reconcile_isvc, set_status
from tests.adapters.workloads import llama_isvc
from tests.support import NAMESPACE, Reactor


@pytest.fixture
def isvc(reactor: Reactor) -> dict[str, Any]:
    install(reactor.sim, "serving.kserve.io_inferenceservices.yaml")
    llama_isvc(reactor.sim)
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


def _template(reactor: Reactor) -> dict[str, Any]:
    return reactor.sim.get("deployments", NAMESPACE, "llama-predictor")["spec"]["template"]


def test_kserve_copies_the_resources_annotations_into_the_predictors_pods(reactor: Reactor,
                                                                          isvc: dict[str, Any]) -> None:
    """The fixture plays KServe as it is (buildObjectMeta): an annotation on the InferenceService rolls the
    predictor's pods. This is what made every state write of the reactor restart the model servers (item 2)."""
    generation = reactor.sim.get("deployments", NAMESPACE, "llama-predictor")["metadata"]["generation"]
    obj = custom(reactor.sim, "inferenceservices", "llama")
    obj["metadata"].setdefault("annotations", {})["team.example.com/owner"] = "search"
    reactor.sim.apply(obj)
    reconcile_isvc(reactor.sim, "llama")
    assert _template(reactor)["metadata"]["annotations"]["team.example.com/owner"] == "search"
    assert reactor.sim.get("deployments", NAMESPACE, "llama-predictor")["metadata"]["generation"] == generation + 1


def test_the_reactors_state_and_the_verified_mark_never_roll_the_predictor(reactor: Reactor,
                                                                           isvc: dict[str, Any]) -> None:
    """Issue 24 item 2: the reactor's own annotations live on the Lease `llama.gpu-reactor` the InferenceService
    owns (by uid), never on the InferenceService: a replicas change, its record, and the verifier's "verified" mark
    leave the predictor's pod template as KServe built it."""
    before = _template(reactor)
    outcomes = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "scale-replicas")}, outcomes
    reconcile_isvc(reactor.sim, "llama")
    assert _template(reactor) == before
    obj = custom(reactor.sim, "inferenceservices", "llama")
    assert not [k for k in obj["metadata"].get("annotations") or {} if k.startswith("gpu-reactor.io/")]
    home = reactor.sim.get("leases", NAMESPACE, "llama.gpu-reactor")
    assert [r["uid"] for r in home["metadata"]["ownerReferences"]] == [obj["metadata"]["uid"]]
    assert {"gpu-reactor.io/last-action", "gpu-reactor.io/state-mac"} <= set(home["metadata"]["annotations"])
    # The verified mark, as the verifier sends it (annotations only, conditional on the read): the
    # InferenceService is not written at all.
    kube = reactor.service.kube
    adapter = reactor.service.engine.adapters.get("InferenceService")
    read = kube.get("InferenceService", NAMESPACE, "llama", adapter)
    assert read["metadata"]["annotations"]["gpu-reactor.io/last-action"]  # the reactor reads its state back
    mark = {"gpu-reactor.io/verification": '{"reason":"","result":"verified","since":"2026-01-01T00:00:00Z",'
                                           '"strategy":"scale-replicas-down"}'}
    kube.patch("InferenceService", NAMESPACE, "llama",
               {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"], "annotations": mark}}, adapter)
    assert custom(reactor.sim, "inferenceservices", "llama")["metadata"]["resourceVersion"] == \
        obj["metadata"]["resourceVersion"]
    assert reactor.sim.get("leases", NAMESPACE, "llama.gpu-reactor")["metadata"]["annotations"][
        "gpu-reactor.io/verification"] == mark["gpu-reactor.io/verification"]
    if reactor.service.verifier is not None:
        reactor.service.verifier.check_all()
    reconcile_isvc(reactor.sim, "llama")
    assert _template(reactor) == before


def test_a_state_lease_of_another_uid_is_not_believed(reactor: Reactor, isvc: dict[str, Any]) -> None:
    """A Lease of the state's name that the InferenceService does not own (a namesake left by a deleted one,
    or a tenant's): its contents are ignored, and the next write takes it over for this uid."""
    reactor.sim.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {},
                       "metadata": {"name": "llama.gpu-reactor", "namespace": NAMESPACE,
                                    "ownerReferences": [{"apiVersion": "serving.kserve.io/v1beta1",
                                                         "kind": "InferenceService", "name": "llama",
                                                         "uid": "00000000-0000-0000-0000-000000000000"}],
                                    "annotations": {"gpu-reactor.io/cooldown-until": "2199-01-01T00:00:00Z"}}})
    kube = reactor.service.kube
    read = kube.get("InferenceService", NAMESPACE, "llama", reactor.service.engine.adapters.get("InferenceService"))
    assert "gpu-reactor.io/cooldown-until" not in read["metadata"]["annotations"]
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, outcomes
    home = reactor.sim.get("leases", NAMESPACE, "llama.gpu-reactor")
    assert [r["uid"] for r in home["metadata"]["ownerReferences"]] == [isvc["metadata"]["uid"]]


def test_a_look_alike_deployment_is_refused(reactor: Reactor, isvc: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: a Deployment with the InferenceService's uid and KServe's labels, not the name
    KServe gives the predictor's Deployment (`llama-predictor`, constants.PredictorServiceName)."""
    from tests.adapters.operators import container, owner_ref
    labels = {"serving.kserve.io/inferenceservice": "llama", "component": "predictor", "app": "mine"}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "mine", "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": owner_ref(isvc)},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "mine"}},
                                "template": {"metadata": {"labels": labels},
                                             "spec": {"containers": [container("kserve-container", 4)]}}}})
    reactor.sim.settle()
    (pod,) = [p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE, label_selector="app=mine")]
    (outcome,) = _post(reactor, "GPUIdle", value=0.0, gpus=4, pods=[pod])
    assert outcome["reason"] == "owner-unverified" and "llama-predictor" in outcome["detail"], outcome
    assert _predictor(reactor) == isvc["spec"]["predictor"]
