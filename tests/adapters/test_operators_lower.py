"""Issue 36's lower items: a LeaderWorkerSet of size 1 has no worker StatefulSet; Knative hashes long child names;
JobSet's restart-attempt label proves no ownership; a Kueue label on a Notebook never reaches a pod. Each on the
operators' real CRDs (../shared/crds), its objects built as the operator's own code builds them
(tests/adapters/operators.py, the upstream function named on each), and `reactor plan` saying the change or the
refusal."""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

import pytest

from reactor.integrations.adapters.kmeta import child_name
from reactor_sim import SimCluster
from tests.adapters.operators import (
    JOBSET,
    KNATIVE,
    LWS,
    LWS_GROUP,
    container,
    custom,
    install_upstream,
    lws_worker_statefulset,
    needs_shared,
    reconcile_isvc_serverless,
    reconcile_jobset,
    reconcile_lws,
    reconcile_notebook,
    set_status,
)
from tests.adapters.steps import plan, post
from tests.adapters.workloads import KUEUE_CRDS, kueue_queues
from tests.support import NAMESPACE, Reactor

pytestmark = needs_shared
QUEUE, PRIORITY = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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
    text = plan(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert "owner-unverified" in text and "has size 1" in text, text
    outcome = post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert outcome["reason"] == "owner-unverified", outcome
    assert "StatefulSet vllm-0: LeaderWorkerSet vllm has size 1" in outcome["detail"], outcome
    assert custom(sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


def test_the_same_worker_statefulset_under_an_lws_of_size_two_is_believed(reactor: Reactor) -> None:
    """The control: with size 2 the LWS controller made that StatefulSet itself; its worker's alert changes the
    workerTemplate."""
    _lws(reactor, 2)
    assert reactor.sim.get("statefulsets", NAMESPACE, "vllm-0")["metadata"]["labels"][LWS] == "vllm"
    assert "would apply: resize-gpu vllm-worker: 8 → 2" in plan(reactor, "GPUUnderutilized", "vllm-0-1",
                                                                  "vllm-worker", 0.1, 8)
    outcome = post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
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
    outcome = post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm-worker", 0.1, 8)
    assert outcome["reason"] == "owner-unverified" and expected in outcome["detail"], outcome
    assert custom(sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


# --- 2: Knative hashes a child name that would pass 63 characters (kmeta.ChildName) --------------------------------

# knative.dev/pkg kmeta/names_test.go TestChildName (at 521cb33b33dd, the commit knative/serving knative-v1.23.0 pins),
# every case as upstream writes it.
CHILD_NAMES = [
    ("asdf", "-deployment", "asdf-deployment"),
    ("f" * 63, "-deployment", "ffffffffffffffffffff105d7597f637e83cc711605ac3ea4957-deployment"),
    ("f" * 63, "-deploy", "ffffffffffffffffffffffff105d7597f637e83cc711605ac3ea4957-deploy"),
    ("f" * 63, "f" * 63, "fffffffffffffffffffffffffffffff0502661254f13c89973cb3a83e0cbec0"),
    ("a", "f" * 63, "ab5cfd486935decbc0d305799f4ce4414ffffffffffffffffffffffffffffff"),
    ("b" * 32, "f" * 32, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb329c7c81b9ab3ba71aa139066aa5625d"),
    ("aaaa", "b---a" * 20, "aaaa7a3f7966594e3f0849720eced8212c18b---ab---ab---ab---ab---ab"),
    ("a" * 17, "a.-.-.-.-.-.-.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "aaaaaaaaaaaaaaaaaa1eb10dc911444f8434af83b7225442da"),
]


@pytest.mark.parametrize("parent, suffix, want", CHILD_NAMES,
                         ids=["short", "long-parent", "long-parent-short-suffix", "both-long", "long-suffix",
                              "both-32", "dashes-trimmed", "dots-trimmed"])
def test_child_name_is_knatives(parent: str, suffix: str, want: str) -> None:
    got = child_name(parent, suffix)
    assert got == want
    assert len(got) <= 63 and DNS_SUBDOMAIN.match(got), got  # upstream also checks IsDNS1123Subdomain


LONG = "llama-3-1-70b-instruct-finetuned-support-agent-eu1"  # 50 characters: KServe allows up to 53 (ksvc ≤ 63)


def _long_isvc(reactor: Reactor) -> tuple[str, str]:
    """A serverless InferenceService with a 50-character name on KServe v0.20.0's and Knative Serving 1.23's real
    CRDs, built as KServe (ksvc_reconciler.go) and Knative build it (reconcile_isvc_serverless): Knative Service and
    Configuration `<isvc>-predictor` (60 characters), Revision kmeta.ChildName(configuration, "-00001") and
    Deployment kmeta.ChildName(revision, "-deployment"), both hashed. Returns (revision, Deployment)."""
    install_upstream(reactor.sim, "serving.kserve.io_inferenceservices.yaml", "serving.knative.dev_services.yaml",
                     "serving.knative.dev_configurations.yaml", "serving.knative.dev_revisions.yaml")
    reactor.sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": LONG, "namespace": NAMESPACE},
                       "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 2,
                                              "containers": [container("kserve-container", 4)]}}})
    reconcile_isvc_serverless(reactor.sim, LONG)
    (revision,) = [r["metadata"]["name"] for r in reactor.sim.list("revisions", NAMESPACE)]
    (deployment,) = [d["metadata"]["name"] for d in reactor.sim.list("deployments", NAMESPACE)
                     if d["metadata"]["labels"].get(f"{KNATIVE}/revision") == revision]
    return revision, deployment


def _pods_of(reactor: Reactor, deployment: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE)
                  if p["metadata"]["name"].startswith(f"{deployment}-") and not p["metadata"].get("deletionTimestamp"))


def test_a_long_named_serverless_isvc_is_changed_through_knatives_hashed_names(reactor: Reactor) -> None:
    """It used to be refused as owner-unverified: the reactor expected `<revision>-deployment` (72 characters)."""
    revision, deployment = _long_isvc(reactor)
    assert revision == child_name(f"{LONG}-predictor", "-00001") != f"{LONG}-predictor-00001" and len(revision) == 63
    # ChildName for a 63-character parent and an 11-character suffix: its first 63 − 32 − 11 characters, its md5.
    assert deployment == revision[:20] + hashlib.md5(revision.encode()).hexdigest() + "-deployment", deployment
    pod = _pods_of(reactor, deployment)[0]
    text = plan(reactor, "GPUUnderutilized", pod, "kserve-container", 0.1, 4)
    assert f"workload: InferenceService/{NAMESPACE}/{LONG}" in text and "would apply: resize-gpu" in text, text
    outcome = post(reactor, "GPUUnderutilized", pod, "kserve-container", 0.1, 4)
    assert outcome["result"] == "applied", outcome
    predictor = custom(reactor.sim, "inferenceservices", LONG)["spec"]["predictor"]
    assert predictor["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_deployment_named_by_plain_concatenation_is_not_knatives(reactor: Reactor) -> None:
    """The name the reactor used to expect, `<revision>-deployment`, is one Knative never gives where it passes 63
    characters: a Deployment so named (every label, the Revision's uid and selector copied) is a look-alike."""
    revision, deployment = _long_isvc(reactor)
    real = reactor.sim.get("deployments", NAMESPACE, deployment)
    forged = copy.deepcopy(real)
    forged["metadata"] = {k: v for k, v in real["metadata"].items()
                          if k in ("namespace", "labels", "ownerReferences")} | {"name": f"{revision}-deployment"}
    forged.pop("status", None)
    reactor.sim.apply(forged)
    reactor.sim.settle()
    pod = _pods_of(reactor, f"{revision}-deployment")[0]
    text = plan(reactor, "GPUUnderutilized", pod, "kserve-container", 0.1, 4)
    assert "owner-unverified" in text and deployment in text, text
    outcome = post(reactor, "GPUUnderutilized", pod, "kserve-container", 0.1, 4)
    assert outcome["reason"] == "owner-unverified" and f"Knative names the Deployment of Revision {revision} " \
        f"{deployment}" in outcome["detail"], outcome


# --- 3: JobSet's restart-attempt label tells a Job's run, never its owner --------------------------------------------

def _jobset(reactor: Reactor) -> None:
    """A JobSet of 2 workers (4 GPUs each) on JobSet v0.12.0's real CRD, its Jobs as jobset_controller.go constructJob
    and labelAndAnnotateObject build them (reconcile_jobset: restart-attempt = status.restarts)."""
    install_upstream(reactor.sim, "jobset.x-k8s.io_jobsets.yaml")
    pod = {"restartPolicy": "Never", "containers": [container("trainer", 4)]}
    reactor.sim.apply({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                       "metadata": {"name": "train", "namespace": NAMESPACE},
                       "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {
                           "spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}}}}]}})
    reconcile_jobset(reactor.sim, "train")


def _job_pod(reactor: Reactor, job: str) -> str:
    return next(p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE, label_selector=f"{JOBSET}=train")
                if p["metadata"]["name"].startswith(f"{job}-"))


def test_a_job_of_a_previous_restart_attempt_is_named_as_such(reactor: Reactor) -> None:
    """A worker fails and the JobSet restarts: the controller writes status.restarts 1 (updateStatus) and deletes the
    attempt-0 Jobs (getChildJobs: previous; deleteJobs). An alert on a pod of one of them names why nothing is done:
    the Job is of a previous attempt — not that its owner is unproven by a label anyone may write. Once the
    controller has created the attempt-1 Jobs under the same names, their pods reach the JobSet."""
    _jobset(reactor)
    old_pod = _job_pod(reactor, "train-workers-0")
    set_status(reactor.sim, "jobsets", "train", {"restarts": 1})
    text = plan(reactor, "GPUUnderutilized", old_pod, "trainer", 0.1, 4)
    assert "owner-unverified" in text and "a previous restart attempt, which the JobSet controller deletes" in text
    outcome = post(reactor, "GPUUnderutilized", old_pod, "trainer", 0.1, 4)
    assert outcome["reason"] == "owner-unverified", outcome
    assert "restart-attempt='0' while the JobSet is on restart attempt 1" in outcome["detail"], outcome
    assert "not the JobSet's current run" in outcome["detail"], outcome
    for job in ("train-workers-0", "train-workers-1"):  # deleteJobs, then the next Reconcile creates them again
        reactor.sim.delete("jobs", NAMESPACE, job)
    reactor.sim.settle()
    reconcile_jobset(reactor.sim, "train")
    new_pod = _job_pod(reactor, "train-workers-0")
    outcome = post(reactor, "GPUUnderutilized", new_pod, "trainer", 0.1, 4)
    assert (outcome["workload"], outcome["reason"]) == (f"JobSet/{NAMESPACE}/train", "operator-forbids"), outcome


# --- 4: a Kueue label on a Notebook never reaches a pod ---------------------------------------------------------------

def _kueue_notebook(sim: SimCluster) -> None:
    """A Notebook submitted to LocalQueue team-a at WorkloadPriorityClass wpc-low, on kubeflow/notebooks v1.11.0's and
    Kueue v0.19.2's real CRDs; its StatefulSet as notebook_controller.go generateStatefulSet builds it
    (reconcile_notebook: the Notebook's labels copied into the pod template at creation)."""
    install_upstream(sim, "kubeflow.org_notebooks.yaml", *KUEUE_CRDS)
    kueue_queues(sim)
    sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
               "metadata": {"name": "jupyter", "namespace": NAMESPACE,
                            "labels": {QUEUE: "team-a", PRIORITY: "wpc-low"}},
               "spec": {"template": {"spec": {"containers": [container("notebook", 4)]}}}})
    reconcile_notebook(sim, "jupyter")


def test_the_notebook_controller_never_carries_a_label_change_to_the_pod_template(sim: SimCluster) -> None:
    """The fixture quotes the operator: a label changed on the Notebook by hand stays off the StatefulSet's template
    after the controller's reconcile (CopyStatefulSetFields copies the template's spec only)."""
    _kueue_notebook(sim)
    template = sim.get("statefulsets", NAMESPACE, "jupyter")["spec"]["template"]["metadata"]["labels"]
    assert (template[QUEUE], template[PRIORITY]) == ("team-a", "wpc-low")
    nb = custom(sim, "notebooks", "jupyter")
    nb["metadata"]["labels"][PRIORITY] = "wpc-high"
    sim.apply(nb)
    reconcile_notebook(sim, "jupyter")
    assert sim.get("statefulsets", NAMESPACE, "jupyter")["spec"]["template"]["metadata"]["labels"][PRIORITY] == \
        "wpc-low"
    assert sim.get("pods", NAMESPACE, "jupyter-0")["metadata"]["labels"][PRIORITY] == "wpc-low"


def test_a_kueue_label_change_on_a_notebook_is_refused_by_name(kueue_reactor: Reactor) -> None:
    """It used to be written (and then marked verified): a label that reaches nothing."""
    reactor, sim = kueue_reactor, kueue_reactor.sim
    _kueue_notebook(sim)
    text = plan(reactor, "GPUSaturated", "jupyter-0", "notebook", 0.99, 4)
    assert "operator-forbids" in text and "CopyStatefulSetFields" in text, text
    outcome = post(reactor, "GPUSaturated", "jupyter-0", "notebook", 0.99, 4)
    assert outcome["reason"] == "operator-forbids" and "the change would change nothing" in outcome["detail"], outcome
    assert custom(sim, "notebooks", "jupyter")["metadata"]["labels"][PRIORITY] == "wpc-low"
    assert reactor.sim.requests[("patch", "notebooks", "")] == 0
    (event,) = [e for e in sim.list("events", NAMESPACE)
                if e["involvedObject"]["name"] == "jupyter" and e["reason"] == "OperatorForbids"]
    assert "generateStatefulSet" in event["message"], event
