"""KServe InferenceService in serverless mode (KServe's default) over HTTP, with the InferenceService and Knative
Serving CRDs installed.

Pods → ReplicaSet → Deployment `<revision>-deployment` → Revision → Configuration → Knative Service
`<isvc>-predictor` → InferenceService: each Knative hop is believed by uid and Knative's labels, and the reactor
changes the predictor in the InferenceService, never the Knative objects below it (KServe and Knative own them).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from tests.adapters.operators import (
    GPU,
    ISVC_LABEL,
    KNATIVE,
    _knative_component,
    custom,
    install,
    reconcile_isvc_serverless,
)
from tests.adapters.workloads import llama_isvc
from tests.support import NAMESPACE, Reactor

ISVC = f"InferenceService/{NAMESPACE}/llama"


def _install(reactor: Reactor) -> None:
    install(reactor.sim, "serving.kserve.io_inferenceservices.yaml", "serving.knative.dev.yaml")


@pytest.fixture
def serverless(reactor: Reactor) -> dict[str, Any]:
    """A predictor of 4 GPUs (model resources), min 2 / max 4 replicas, run by Knative as Revision 00001."""
    _install(reactor)
    llama_isvc(reactor.sim)
    reconcile_isvc_serverless(reactor.sim, "llama")
    return custom(reactor.sim, "inferenceservices", "llama")


def _pods(reactor: Reactor) -> list[str]:
    pods = reactor.sim.list("pods", NAMESPACE, label_selector=f"{ISVC_LABEL}=llama,component=predictor")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def _post(reactor: Reactor, name: str, *, status: str = "firing", pods: list[str] | None = None,
          **kw: Any) -> list[dict[str, Any]]:
    pods = pods or _pods(reactor)
    assert pods, "the predictor has pods"
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, "kserve-container", status=status, **kw)
                                   for pod in pods]))
    assert r.status_code == 200, r.get_json()
    return r.get_json()["outcomes"]


def _predictor(reactor: Reactor) -> dict[str, Any]:
    return custom(reactor.sim, "inferenceservices", "llama")["spec"]["predictor"]


def _why(outcomes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(o["result"], o.get("reason"), o.get("detail")) for o in outcomes]


def _no_write_below(reactor: Reactor) -> None:
    for plural in ("deployments", "services", "configurations", "revisions"):
        assert reactor.sim.requests[("patch", plural, "")] == 0, plural


def test_the_pods_run_under_knative(reactor: Reactor, serverless: dict[str, Any]) -> None:
    """The fixture is what KServe and Knative build: the chain the resolver walks."""
    (deployment,) = reactor.sim.list("deployments", NAMESPACE, label_selector=f"{ISVC_LABEL}=llama")
    assert deployment["metadata"]["name"] == "llama-predictor-00001-deployment"
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "Revision"
    assert len(_pods(reactor)) == 2


def test_an_underused_serverless_predictor_shrinks_its_model_resources(reactor: Reactor,
                                                                        serverless: dict[str, Any]) -> None:
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {(o["result"], o["workload"]) for o in outcomes} == {("applied", ISVC)}, _why(outcomes)
    predictor = _predictor(reactor)
    assert predictor["model"]["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
    assert predictor["model"]["storageUri"] == "hf://meta-llama/Llama-3.1-8B"
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 1
    _no_write_below(reactor)
    # KServe carries it to the Knative Service, and Knative to a new Revision whose pods ask for 1 GPU.
    reconcile_isvc_serverless(reactor.sim, "llama")
    pods = reactor.sim.list("pods", NAMESPACE, label_selector=f"{KNATIVE}/revision=llama-predictor-00002")
    assert len(pods) == 2
    assert {p["spec"]["containers"][0]["resources"]["limits"][GPU] for p in pods} == {"1"}


def test_an_idle_serverless_predictor_scales_its_min_replicas_down(reactor: Reactor,
                                                                   serverless: dict[str, Any]) -> None:
    outcomes = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, _why(outcomes)
    assert (_predictor(reactor)["minReplicas"], _predictor(reactor)["maxReplicas"]) == (1, 4)


def test_a_saturated_serverless_predictor_grows_and_the_resolve_reverts_it(reactor: Reactor,
                                                                          serverless: dict[str, Any]) -> None:
    firing = _pods(reactor)
    grown = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)
    assert {o["result"] for o in grown} == {"applied"}, _why(grown)
    assert int(_predictor(reactor)["model"]["resources"]["limits"][GPU]) > 4
    reconcile_isvc_serverless(reactor.sim, "llama")  # Revision 00002; 00001 scales to zero
    assert not set(firing) & set(_pods(reactor)), "Knative's new Revision replaced the pods that fired"
    # The resolve names the vanished pods: found through their ReplicaSet, up the old Revision's chain.
    outcomes = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved", pods=firing)
    assert {(o["result"], o.get("action")) for o in outcomes} == {("applied", "revert")}, _why(outcomes)
    assert _predictor(reactor)["model"]["resources"]["limits"][GPU] == "4"
    _no_write_below(reactor)


def test_a_starved_serverless_predictor_moves_up_the_ladder(reactor: Reactor, serverless: dict[str, Any]) -> None:
    outcomes = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert {o["result"] for o in outcomes} == {"applied"}, _why(outcomes)
    assert _predictor(reactor)["priorityClassName"] == "high-priority-gpu"


def test_a_predictor_whose_new_revision_is_not_ready_is_left_alone(reactor: Reactor,
                                                                  serverless: dict[str, Any]) -> None:
    """KServe rolls a change out as a new Revision; until it is ready (latestCreatedRevision is not
    latestReadyRevision) the reactor does not change the predictor again."""
    spec = custom(reactor.sim, "inferenceservices", "llama")
    spec["spec"]["predictor"]["model"]["resources"]["limits"]["memory"] = "64Gi"  # the user's own change
    reactor.sim.apply(spec)
    old = _pods(reactor)
    reconcile_isvc_serverless(reactor.sim, "llama", ready=False)
    assert set(old) < set(_pods(reactor)), "the old Revision serves until the new one is ready"
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4, pods=old)
    assert {o["reason"] for o in outcomes} == {"rollout-in-progress"}, _why(outcomes)
    assert "Revision llama-predictor-00002 is not ready" in outcomes[0]["detail"]
    assert _predictor(reactor)["model"]["resources"]["limits"][GPU] == "4"


def _forge(reactor: Reactor, name: str, *, uid: str, labels: dict[str, str]) -> str:
    """A Deployment a tenant made, claiming the predictor's Revision; returns its pod."""
    rev = custom(reactor.sim, "revisions", "llama-predictor-00001")
    ref = {"apiVersion": f"{KNATIVE}/v1", "kind": "Revision", "name": rev["metadata"]["name"], "uid": uid,
           "controller": True, "blockOwnerDeletion": True}
    pod_labels = {**labels, "app": name}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "ownerReferences": [ref]},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": pod_labels},
                                             "spec": {"containers": [{"name": "kserve-container",
                                                                      "image": "registry.example.com/x:1",
                                                                      "resources": {"limits": {GPU: "4"},
                                                                                    "requests": {GPU: "4"}}}]}}}})
    reactor.sim.settle()
    (pod,) = reactor.pods(name)
    return pod


def test_a_forged_hop_to_a_revision_is_not_believed(reactor: Reactor, serverless: dict[str, Any]) -> None:
    rev = custom(reactor.sim, "revisions", "llama-predictor-00001")
    uid = rev["metadata"]["uid"]
    right = {f"{KNATIVE}/revision": "llama-predictor-00001", f"{KNATIVE}/revisionUID": uid,
             ISVC_LABEL: "llama", "component": "predictor"}
    other_uid = custom(reactor.sim, "configurations", "llama-predictor")["metadata"]["uid"]
    pods = {"wrong-uid": _forge(reactor, "wrong-uid", uid=other_uid, labels=right),
            "no-label": _forge(reactor, "no-label", uid=uid, labels={ISVC_LABEL: "llama", "component": "predictor"})}
    for case, pod in pods.items():
        (outcome,) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4, pods=[pod])
        assert outcome["reason"] == "owner-unverified", (case, outcome)
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0
    assert _predictor(reactor) == serverless["spec"]["predictor"]


def test_a_revision_of_a_forged_configuration_link_is_not_believed(reactor: Reactor,
                                                                  serverless: dict[str, Any]) -> None:
    """A Revision a tenant made under the real Configuration (right uid) without Knative's configurationUID label:
    the walk stops there, naming the hop."""
    real = custom(reactor.sim, "revisions", "llama-predictor-00001")
    forged = {**real, "metadata": {"name": "llama-predictor-99999", "namespace": NAMESPACE,
                                   "labels": {k: v for k, v in real["metadata"]["labels"].items()
                                              if k != f"{KNATIVE}/configurationUID"},
                                   "ownerReferences": real["metadata"]["ownerReferences"]}}
    forged.pop("status", None)
    reactor.sim.apply(forged)
    rev = custom(reactor.sim, "revisions", "llama-predictor-99999")
    labels = {**{k: v for k, v in rev["metadata"]["labels"].items()}, f"{KNATIVE}/revision": "llama-predictor-99999",
              f"{KNATIVE}/revisionUID": rev["metadata"]["uid"]}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "llama-predictor-99999-deployment", "namespace": NAMESPACE,
                                    "labels": labels,
                                    "ownerReferences": [{"apiVersion": f"{KNATIVE}/v1", "kind": "Revision",
                                                         "name": "llama-predictor-99999", "uid": rev["metadata"]["uid"],
                                                         "controller": True}]},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "forged"}},
                                "template": {"metadata": {"labels": {**labels, "app": "forged"}},
                                             "spec": {"containers": [{"name": "kserve-container", "image": "x:1"}]}}}})
    reactor.sim.settle()
    (pod,) = reactor.pods("forged")
    (outcome,) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4, pods=[pod])
    assert outcome["reason"] == "owner-unverified", outcome
    assert f"{KNATIVE}/configurationUID" in outcome["detail"]
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


def test_a_knative_service_of_the_users_own_is_not_an_inferenceservice(reactor: Reactor) -> None:
    """A Knative Service no InferenceService controls: unsupported-owner, named as Knative's Service (not core's)."""
    _install(reactor)
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "llama", "namespace": NAMESPACE},
                       "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                                                        "resources": {"limits": {GPU: "4"}, "requests": {GPU: "4"}}}}}})
    reconcile_isvc_serverless(reactor.sim, "llama")
    ksvc = reactor.sim.get(f"services.{KNATIVE}", NAMESPACE, "llama-predictor")
    ksvc["metadata"]["ownerReferences"] = []  # orphaned: the user's own Knative Service now
    reactor.sim.apply(ksvc)
    (outcome,) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["reason"], outcome["workload"]) == (
        "unsupported-owner", f"Service.serving.knative.dev/{NAMESPACE}/llama-predictor"), outcome


def test_a_core_service_is_not_a_knative_service(reactor: Reactor, serverless: dict[str, Any]) -> None:
    """Kinds are told apart by API group: a Configuration whose controller reference names a core v1 `Service`
    (even with the Knative Service's uid) is not believed to be Knative's."""
    config = custom(reactor.sim, "configurations", "llama-predictor")
    config["metadata"]["ownerReferences"][0]["apiVersion"] = "v1"
    reactor.sim.apply(config)
    (outcome, _) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified", outcome
    assert "its controller is Service (v1), not Knative's Service" in outcome["detail"]
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


def test_an_inferenceservice_of_another_group_is_not_believed(reactor: Reactor, serverless: dict[str, Any]) -> None:
    ksvc = reactor.sim.get(f"services.{KNATIVE}", NAMESPACE, "llama-predictor")
    ksvc["metadata"]["ownerReferences"][0]["apiVersion"] = "serving.kserve.example.com/v1beta1"
    reactor.sim.apply(ksvc)
    (outcome, _) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified", outcome
    assert "is of 'serving.kserve.example.com/v1beta1', not serving.kserve.io/v1beta1" in outcome["detail"]
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


def test_the_quota_counts_the_new_revision_beside_the_old(reactor: Reactor, serverless: dict[str, Any]) -> None:
    """Knative starts the new Revision (min-scale pods) while the old one still serves: with no GPU of the quota
    free, even a shrink does not fit, and the refusal counts both replicas as surge."""
    quota = reactor.sim.get("resourcequotas", NAMESPACE, "gpu-quota")
    quota["spec"]["hard"][f"requests.{GPU}"] = quota["status"]["used"][f"requests.{GPU}"]  # all in use
    reactor.sim.apply(quota)
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert {o["reason"] for o in outcomes} == {"quota-exceeded"}, _why(outcomes)
    assert "replicas 2, surge 2" in outcomes[0]["detail"]
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0


def test_the_verified_mark_makes_no_new_revision(reactor: Reactor, serverless: dict[str, Any]) -> None:
    """Issue 24 item 2, serverless: KServe copies the InferenceService's annotations into the Knative Service's
    template (a new Revision for any change); the reactor's state and its verified mark are on the Lease the
    InferenceService owns, so after a shrink (its own Revision) the mark adds none."""
    assert {o["result"] for o in _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)} == {"applied"}
    reconcile_isvc_serverless(reactor.sim, "llama")
    revisions = sorted(r["metadata"]["name"] for r in reactor.sim.list("revisions", NAMESPACE))
    kube, adapter = reactor.service.kube, reactor.service.engine.adapters.get("InferenceService")
    read = kube.get("InferenceService", NAMESPACE, "llama", adapter)
    mark = {"gpu-reactor.io/verification": '{"reason":"","result":"verified","since":"2026-01-01T00:00:00Z",'
                                           '"strategy":"resize-gpu-down"}'}
    kube.patch("InferenceService", NAMESPACE, "llama",
               {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"], "annotations": mark}}, adapter)
    reconcile_isvc_serverless(reactor.sim, "llama")
    assert sorted(r["metadata"]["name"] for r in reactor.sim.list("revisions", NAMESPACE)) == revisions
    template = reactor.sim.get(f"services.{KNATIVE}", NAMESPACE, "llama-predictor")["spec"]["template"]
    assert not [k for k in template["metadata"]["annotations"] if k.startswith("gpu-reactor.io/")]


def test_a_look_alike_knative_service_is_refused(reactor: Reactor, serverless: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: a Knative Service (and Knative's chain under it) with the InferenceService's
    uid and KServe's labels but not the name KServe gives it (`llama-predictor`)."""
    fake = copy.deepcopy(custom(reactor.sim, "inferenceservices", "llama"))
    fake["metadata"]["name"] = "mine"
    _knative_component(reactor.sim, fake, "predictor", True)
    ksvc = reactor.sim.get(f"services.{KNATIVE}", NAMESPACE, "mine-predictor")
    ksvc["metadata"]["ownerReferences"][0]["name"] = "llama"
    ksvc["metadata"]["labels"][ISVC_LABEL] = "llama"
    reactor.sim.apply(ksvc)
    reactor.sim.settle()
    pods = [p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE,
                                                            label_selector=f"{KNATIVE}/configuration=mine-predictor")]
    outcomes = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4, pods=pods)
    assert {o["reason"] for o in outcomes} == {"owner-unverified"}, outcomes
    assert all("llama-predictor" in o["detail"] for o in outcomes), outcomes
    assert custom(reactor.sim, "inferenceservices", "llama")["spec"] == serverless["spec"]


def test_a_deployment_not_named_after_its_revision_is_not_believed(reactor: Reactor,
                                                                   serverless: dict[str, Any]) -> None:
    """Issue 24 item 8 on Knative's own hop: a Deployment with the real Revision's uid and every label Knative sets,
    not the name Knative gives it (`<revision>-deployment`, revision/resources/names.Deployment)."""
    real = reactor.sim.get("deployments", NAMESPACE, "llama-predictor-00001-deployment")
    labels = dict(real["metadata"]["labels"])
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "mine", "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": real["metadata"]["ownerReferences"]},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "mine"}},
                                "template": {"metadata": {"labels": {**labels, "app": "mine"}},
                                             "spec": {"containers": [{"name": "kserve-container", "image": "x:1"}]}}}})
    reactor.sim.settle()
    (pod,) = reactor.pods("mine")
    (outcome,) = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4, pods=[pod])
    assert outcome["reason"] == "owner-unverified" and "llama-predictor-00001-deployment" in outcome["detail"], outcome
    assert reactor.sim.requests[("patch", "inferenceservices", "")] == 0
