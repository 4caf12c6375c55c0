"""Operators as classes: one adapter class per kind behind one base class, the built-in kinds read through the same
interface as the operators', and a workload's operator and Kueue facts as two nested values.

Unit tier: plain objects shaped as each operator's CRD (tests/fixtures/crds) and as its controller writes its
children (the upstream function named beside each).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from reactor.cluster.adapted import adapted_workload
from reactor.cluster.kinds import BuiltinKind, OperatorKind
from reactor.cluster.view import ClusterView
from reactor.core.model import OperatorFacts, QueueFacts, Workload, WorkloadRef
from reactor.core.ownership import ControllerRef
from reactor.integrations.adapters import Adapters
from reactor.integrations.adapters.base import Adapter, Part
from reactor.integrations.adapters.builtin import BUILTIN
from reactor.integrations.adapters.config import parse_custom
from reactor.integrations.adapters.kserve import INFERENCE_SERVICE
from reactor.integrations.adapters.lws import LEADER_WORKER_SET
from reactor.integrations.adapters.ray import RAY_CLUSTER, RAY_SERVICE
from tests.adapters.operators import notebook_statefulset

GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def _container(gpus: int) -> Obj:
    return {"name": "main", "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}


def _isvc(min_replicas: int) -> Obj:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama", "namespace": "ml", "uid": "u-isvc", "generation": 1},
            "spec": {"predictor": {"minReplicas": min_replicas, "containers": [_container(2)]}}}


def _deployment(max_surge: str) -> Obj:
    # kserve v0.20.0 pkg/controller/v1beta1/inferenceservice/reconcilers/deployment: the raw-mode predictor's
    # Deployment, RollingUpdate by default.
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llama-predictor"},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": max_surge}}}}


# kserve v0.20.0 pkg/controller/v1beta1/inferenceservice/reconcilers/knative ksvc_reconciler.go createKnativeService:
# the serverless predictor's Knative Service `<isvc>-predictor`.
KSVC: Obj = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "llama-predictor"}}


def _ray_service(replicas: int, hosts: int) -> Obj:
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "serve", "namespace": "ml", "uid": "u-rs", "generation": 1},
            "spec": {"upgradeStrategy": {"type": "NewCluster"}, "rayClusterConfig": {
                "headGroupSpec": {"template": {"spec": {"containers": [_container(0)]}}},
                "workerGroupSpecs": [{"groupName": "gpu", "replicas": replicas, "numOfHosts": hosts,
                                      "template": {"spec": {"containers": [_container(1)]}}}]}}}


def _lws(replicas: int, size: int, max_surge: int | str) -> Obj:
    template = {"spec": {"containers": [_container(1)]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "vllm", "namespace": "ml", "uid": "u-lws", "generation": 1},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "leaderTemplate": template,
                                                                    "workerTemplate": template},
                     "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": max_surge}}}}


@pytest.mark.parametrize(("adapter", "obj", "part", "child", "surge"), [
    (INFERENCE_SERVICE, _isvc(4), "predictor", _deployment("25%"), 1),  # raw mode: the Deployment's maxSurge
    (INFERENCE_SERVICE, _isvc(4), "predictor", _deployment("3"), 3),
    (INFERENCE_SERVICE, _isvc(4), "predictor", KSVC, 4),  # serverless: a new Revision starts every replica
    (INFERENCE_SERVICE, _isvc(4), "predictor", None, 0),  # no child known: nothing rolls beside
    (RAY_SERVICE, _ray_service(3, 2), "gpu", None, 6),  # a whole new RayCluster: every replica, numOfHosts pods
    (LEADER_WORKER_SET, _lws(4, 3, 1), "worker", None, 2),  # one group of size − 1 = 2 workers
    (LEADER_WORKER_SET, _lws(4, 3, "50%"), "leader", None, 2),  # 50% of 4 groups, one leader each
    (LEADER_WORKER_SET, _lws(4, 3, 9), "leader", None, 4),  # capped at the replicas
], ids=["isvc-raw-percent", "isvc-raw-count", "isvc-serverless", "isvc-no-child", "rayservice", "lws-worker",
        "lws-percent", "lws-capped"])
def test_the_surge_is_one_method_of_the_adapter(adapter: Adapter, obj: Obj, part: str, child: Obj | None,
                                                surge: int) -> None:
    """Pods a template change starts beside the old ones: the adapter's `surge`, times the part's pods."""
    workload = adapted_workload(adapter, obj, part, GPU, child=child)
    assert workload is not None and workload.max_surge == surge


def test_an_operators_facts_are_one_nested_value() -> None:
    group = _ray_service(3, 2)["spec"]["rayClusterConfig"]
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "ray", "namespace": "ml", "uid": "u-rc", "generation": 2,
                            "annotations": {"gpu-reactor.io/allow-recreate": "true"}},
               "spec": {**group, "upgradeStrategy": {"type": "Recreate"}},
               "status": {"observedGeneration": 1}}
    workload = adapted_workload(RAY_CLUSTER, cluster, "gpu", GPU)
    assert workload is not None and workload.operator is not None and workload.kueue is None
    assert (workload.part, workload.operator.pods_per_replica, workload.operator.replica_gpus) == ("gpu", 2, 2)
    assert workload.operator.rollout == "the operator observed generation 1 of 2" and workload.rolling_out
    assert workload.refusals == {}  # upgradeStrategy Recreate, opted in: KubeRay carries a template change to the pods
    assert "head included" in workload.operator.effect  # ... by recreating every pod


OPERATOR = {"resize-gpu": "the operator's", "set-priority": "the operator's priority"}
KUEUE = {"set-priority": "Kueue's label", "resize-gpu": "Kueue's webhook", "scale-replicas": "Kueue's replicas"}


@pytest.mark.parametrize(("operator", "kueue", "refusals"), [
    (OPERATOR, None, OPERATOR),
    (None, KUEUE, KUEUE),
    (None, None, {}),
    # The operator's refusals stand, but for the priority: Kueue manages it through its label.
    (OPERATOR, KUEUE, {"resize-gpu": "the operator's", "set-priority": "Kueue's label",
                       "scale-replicas": "Kueue's replicas"}),
    (OPERATOR, {}, {"resize-gpu": "the operator's"}),  # Kueue lets its label change: no priority refusal at all
], ids=["operator", "kueue", "neither", "both", "kueue-allows-priority"])
def test_the_refusals_merge_the_operators_and_kueues(operator: dict[str, str] | None, kueue: dict[str, str] | None,
                                                     refusals: dict[str, str]) -> None:
    workload = Workload(WorkloadRef("JobSet", "ml", "train"), "1", (),
                        operator=None if operator is None else OperatorFacts(refusals=operator),
                        kueue=None if kueue is None else QueueFacts("team-a", kueue))
    assert dict(workload.refusals) == refusals
    assert workload.queue == ("" if kueue is None else "team-a")


def _calls(lister_log: list[tuple[str, str]], notebook: dict[str, Any] | None = None) -> Any:
    """A lister that logs what it is asked and answers the StatefulSet the notebook controller makes of `notebook`
    (tests/adapters/operators.py `notebook_statefulset`: generateStatefulSet)."""
    def lister(kind: str, namespace: str) -> list[dict[str, Any]]:
        lister_log.append((kind, namespace))
        return [notebook_statefulset(notebook)] if notebook is not None else []
    return lister


def test_every_kind_is_read_through_one_interface() -> None:
    """The built-in kinds are read through the same `WorkloadKind` as an operator's: the view asks the kind, it does
    not branch on whether an adapter exists."""
    view = ClusterView(adapters=Adapters(BUILTIN[:1]), gpu_resource=GPU, state_keys=None)  # Notebook only
    assert isinstance(view.kind("Deployment"), BuiltinKind) and isinstance(view.kind("Notebook"), OperatorKind)
    assert isinstance(view.kind("RayCluster"), BuiltinKind)  # not enabled: not the operator's
    assert [view.changeable(k) for k in ("Deployment", "StatefulSet", "CronJob", "Job", "Notebook", "RayCluster")] \
        == [True, True, True, False, True, False]
    listed: list[tuple[str, str]] = []
    deployment = {"metadata": {"name": "web", "namespace": "ml", "uid": "u-web"}}
    assert view.child(deployment, "Deployment", _calls(listed)) is None and listed == []  # its own controller's
    notebook = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                "metadata": {"name": "jupyter", "namespace": "ml", "uid": "u-nb"},
                "spec": {"template": {"spec": {"containers": [_container(1)]}}}}
    child = view.child(notebook, "Notebook", _calls(listed, notebook))
    assert child is not None and child["kind"] == "StatefulSet" and listed == [("StatefulSet", "ml")]
    assert view.part_of(deployment, "Deployment") == "" and view.part_of(notebook, "Notebook") == ""


def test_a_custom_adapter_without_a_naming_rule_only_recommends() -> None:
    entry = {"kind": "TrainingRun", "group": "ml.example.com", "version": "v1alpha1", "plural": "trainingruns",
             "children": ["StatefulSet"], "podSpec": "spec.worker.template.spec", "replicas": "spec.worker.replicas"}
    (unnamed,) = parse_custom("adapters.custom", [entry])
    (named,) = parse_custom("adapters.custom", [{**entry, "childName": "{owner}-worker"}])
    assert "declares no naming rule" in unnamed.recommend_only() and named.recommend_only() == ""
    owner, child = {"metadata": {"name": "bert"}}, {"metadata": {"name": "bert-worker"}}
    assert named.names_child(owner, "StatefulSet", child) is None
    assert named.names_child({"metadata": {"name": "gpt"}}, "StatefulSet", child) == \
        "the adapter's childName rule names that StatefulSet gpt-worker, not bert-worker"
    run = {"metadata": {"name": "bert", "namespace": "ml", "generation": 1},
           "spec": {"worker": {"replicas": 2, "template": {"spec": {"containers": [_container(1)]}}}}}
    workload = adapted_workload(unnamed, run, "", GPU)
    assert workload is not None and workload.operator is not None and workload.replicas == 2
    assert workload.operator.recommend_only == unnamed.recommend_only()


def test_an_adapter_that_declares_no_naming_rule_recommends_by_default() -> None:
    """The safe default: a subclass that does not say how its operator names its children never writes."""
    class Forgetful(Adapter):
        def parts(self, obj: Mapping[str, Any]) -> tuple[Part, ...]:
            return (Part("", ("spec", "template", "spec")),)
    assert "declares no naming rule" in Forgetful("Trainer", "ml.example.com", "v1", "trainers",
                                                  frozenset({"Pod"})).recommend_only()
    assert [a.recommend_only() for a in BUILTIN] == [""] * len(BUILTIN)


def test_only_kserve_climbs_a_chain_of_its_own() -> None:
    """The resolver names no Knative: an adapter walks its operator's own chain (KServe's serverless Revisions)."""
    revision = ControllerRef("Revision", "llama-predictor-00001", "u-rev", "serving.knative.dev/v1")
    deployment = {"metadata": {"name": "llama-predictor-00001-deployment", "namespace": "ml"}}
    fetched: list[tuple[str, ...]] = []

    def fetch(group: str, version: str, plural: str, name: str) -> None:
        fetched.append((group, version, plural, name))
        return None
    assert all(a.climb("Deployment", deployment, revision, fetch) is None for a in BUILTIN if a is not
               INFERENCE_SERVICE)
    replicaset = ControllerRef("ReplicaSet", "web-1", "u-rs", "apps/v1")
    assert INFERENCE_SERVICE.climb("Deployment", deployment, replicaset, fetch) is None and fetched == []
    climbed = INFERENCE_SERVICE.climb("Deployment", deployment, revision, fetch)
    assert climbed is not None and climbed.top is None and climbed.failure.endswith("is gone")
    assert climbed.stopped_at == ("Revision", "llama-predictor-00001")
    assert fetched == [("serving.knative.dev", "v1", "revisions", "llama-predictor-00001")]


def test_a_child_that_only_copies_the_resources_uid_is_not_its_child() -> None:
    """Anyone who can read the Notebook can copy its uid into a StatefulSet's controller reference: the child the
    rollout, the replicas and the surge are read from must also carry what the notebook controller sets (links.py,
    as the ownership walk checks), else there is none."""
    view = ClusterView(adapters=Adapters(BUILTIN[:1]), gpu_resource=GPU, state_keys=None)  # Notebook only
    notebook = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                "metadata": {"name": "jupyter", "namespace": "ml", "uid": "u-nb"},
                "spec": {"template": {"spec": {"containers": [_container(1)]}}}}
    genuine = notebook_statefulset(notebook)
    forged = {**genuine, "spec": {**genuine["spec"], "template": {"spec": genuine["spec"]["template"]["spec"]}}}
    assert view.child(notebook, "Notebook", lambda kind, namespace: [forged]) is None
    assert view.child(notebook, "Notebook", lambda kind, namespace: [forged, genuine]) == genuine
