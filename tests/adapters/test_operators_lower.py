"""Issue 36's lower items: a LeaderWorkerSet of size 1 has no worker StatefulSet; Knative hashes long child names;
JobSet's restart-attempt label proves no ownership; a Kueue label on a Notebook never reaches a pod. Each on the
operators' real CRDs (../shared/crds), its objects built as the operator's own code builds them
(tests/adapters/operators.py, the upstream function named on each), and `reactor plan` saying the change or the
refusal."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout
from typing import Any

import pytest

from reactor.app.assembly import build_engine
from reactor.intake.alerts import parse_notification
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from tests.adapters.operators import (
    LWS,
    LWS_GROUP,
    container,
    custom,
    install_upstream,
    lws_worker_statefulset,
    needs_shared,
    reconcile_lws,
)
from tests.support import NAMESPACE, Reactor

pytestmark = needs_shared


def _post(reactor: Reactor, alert: str, pod: str, name: str, value: float, gpus: int) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec(alert, NAMESPACE, pod, name, value, gpus)]))
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


# --- 1: a LeaderWorkerSet of size 1 makes no worker StatefulSet ---------------------------------------------------

def _lws(reactor: Reactor, size: int) -> dict[str, Any]:
    """One group of `size` (a 4-GPU leader, workers of 8 GPUs) on LWS v0.10.0's real CRD, its StatefulSets as
    leaderworkerset_controller.go and pod_controller.go Reconcile build them (reconcile_lws: none for the workers where
    the size is 1)."""
    install_upstream(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    reactor.sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                       "metadata": {"name": "vllm", "namespace": NAMESPACE},
                       "spec": {"replicas": 1, "leaderWorkerTemplate": {
                           "size": size,
                           "leaderTemplate": {"spec": {"containers": [container("vllm-leader", 4)]}},
                           "workerTemplate": {"spec": {"containers": [container("vllm-worker", 8)]}}}}})
    reconcile_lws(reactor.sim, "vllm")
    return custom(reactor.sim, "leaderworkersets", "vllm")


def test_a_worker_statefulset_under_an_lws_of_size_one_is_not_believed(reactor: Reactor) -> None:
    """Size 1: pod_controller.go Reconcile returns before building a worker StatefulSet, so the leader pod's name is
    free for one. A tenant makes it exactly as constructWorkerStatefulSetApplyConfiguration would (the leader pod's
    uid, every label, the selector, the annotations, blockOwnerDeletion) — it used to pass the worker hop, and its
    pods' alert shrank the LWS's workerTemplate."""
    lws = _lws(reactor, 1)
    sim = reactor.sim
    assert [s["metadata"]["name"] for s in sim.list("statefulsets", NAMESPACE, label_selector=LWS)] == ["vllm"]
    leader = sim.get("pods", NAMESPACE, "vllm-0")
    look_alike = lws_worker_statefulset({**lws, "spec": {**lws["spec"], "leaderWorkerTemplate": {
        **lws["spec"]["leaderWorkerTemplate"], "size": 2}}}, leader, leader["metadata"]["labels"][
        "leaderworkerset.sigs.k8s.io/template-revision-hash"])
    sim.apply(look_alike)
    sim.settle()
    assert sim.get("pods", NAMESPACE, "vllm-0-1")["metadata"]["labels"][LWS_GROUP] == "0"
    text = _plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "owner-unverified" in text and "has size 1" in text, text
    outcome = _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert outcome["reason"] == "owner-unverified", outcome
    assert "StatefulSet vllm-0: LeaderWorkerSet vllm has size 1" in outcome["detail"], outcome
    assert custom(sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


def test_the_same_worker_statefulset_under_an_lws_of_size_two_is_believed(reactor: Reactor) -> None:
    """The control: with size 2 the LWS controller made that StatefulSet itself; its worker's alert changes the
    workerTemplate."""
    _lws(reactor, 2)
    assert reactor.sim.get("statefulsets", NAMESPACE, "vllm-0")["metadata"]["labels"][LWS] == "vllm"
    assert "would apply: resize-gpu vllm-worker: 8 → 2" in _plan(reactor, "GPUUnderutilized", "vllm-0-1",
                                                                  "vllm-worker", 0.1, 8)
    outcome = _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert outcome["result"] == "applied", outcome
    worker = custom(reactor.sim, "leaderworkersets", "vllm")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


@pytest.mark.parametrize("forge, expected", [
    ("no-block", "blockOwnerDeletion"),
    ("selector", "selector is not the one"),
    ("leader-name", "leaderworkerset.sigs.k8s.io/leader-name"),
    ("group-key", "group-key is not its leader pod's"),
], ids=["no-block", "selector", "leader-name", "group-key"])
def test_a_worker_statefulset_unlike_the_controllers_is_not_believed(reactor: Reactor, forge: str,
                                                                      expected: str) -> None:
    """What the LWS controller sets on the worker StatefulSet it makes for a leader pod (pod_controller.go
    constructWorkerStatefulSetApplyConfiguration, setControllerReferenceWithStatefulSet), each checked against the
    leader pod: one changed, the link is not believed. (The controller's own StatefulSet is replaced by the forged
    one: the name is the same.)"""
    lws = _lws(reactor, 2)
    sim = reactor.sim
    leader = sim.get("pods", NAMESPACE, "vllm-0")
    sts = lws_worker_statefulset(lws, leader, leader["metadata"]["labels"][
        "leaderworkerset.sigs.k8s.io/template-revision-hash"])
    if forge == "no-block":
        sts["metadata"]["ownerReferences"][0].pop("blockOwnerDeletion")
    elif forge == "selector":
        sts["spec"]["selector"]["matchLabels"]["extra"] = "x"
        sts["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    elif forge == "leader-name":
        sts["spec"]["template"]["metadata"]["annotations"].pop("leaderworkerset.sigs.k8s.io/leader-name")
    else:
        key = "leaderworkerset.sigs.k8s.io/group-key"
        for labels in (sts["metadata"]["labels"], sts["spec"]["selector"]["matchLabels"],
                       sts["spec"]["template"]["metadata"]["labels"]):
            labels[key] = "0" * 40
    sim.delete("statefulsets", NAMESPACE, "vllm-0")
    sim.settle()
    sim.apply(sts)
    sim.settle()
    outcome = _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert outcome["reason"] == "owner-unverified" and expected in outcome["detail"], outcome
    assert custom(sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]
