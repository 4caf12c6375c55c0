"""JobSet v1alpha2 over HTTP with its CRD installed (issue 17): pods → Job → JobSet, each link believed by uid and the
labels the JobSet controller puts on its Jobs. The JobSet webhook keeps spec.replicatedJobs immutable (the embedded
cluster plays it: tests/sim/test_jobset_webhook.py), so a GPU, replica or priorityClassName change is refused by name
(`operator-forbids`) and never sent; a JobSet Kueue manages changes priority through Kueue's label, which the
webhook does not look at."""

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
from tests.adapters.operators import JOBSET, container, custom, install, reconcile_jobset
from tests.support import NAMESPACE, Reactor


def _apply(reactor: Reactor, labels: dict[str, str] | None = None) -> dict[str, Any]:
    install(reactor.sim, "jobset.x-k8s.io_jobsets.yaml")
    pod = {"restartPolicy": "Never", "priorityClassName": "medium-priority-gpu",
           "containers": [container("trainer", 4)]}
    reactor.sim.apply({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                       "metadata": {"name": "train", "namespace": NAMESPACE, "labels": labels or {}},
                       "spec": {"replicatedJobs": [
                           {"name": "workers", "replicas": 2,
                            "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}}}}]}})
    reconcile_jobset(reactor.sim, "train")
    return custom(reactor.sim, "jobsets", "train")


@pytest.fixture
def jobset(reactor: Reactor) -> dict[str, Any]:
    return _apply(reactor)


def _pod(reactor: Reactor) -> str:
    pods = reactor.sim.list("pods", NAMESPACE, label_selector=f"{JOBSET}=train")
    return sorted(p["metadata"]["name"] for p in pods)[0]


def _post(reactor: Reactor, name: str, **kw: Any) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, _pod(reactor), "trainer", **kw)]))
    assert r.status_code == 200, r.get_json()
    (outcome,) = r.get_json()["outcomes"]
    return outcome


@pytest.mark.parametrize("alert, value, what", [("GPUUnderutilized", 0.1, "GPU requests"),
                                                ("GPUMemorySaturated", 0.97, "GPU requests"),
                                                ("GPUIdle", 0.0, "replicas"),
                                                ("GPUSaturated", 0.99, "priorityClassName")])
def test_every_change_the_webhook_forbids_is_refused_by_name_and_never_sent(
        reactor: Reactor, jobset: dict[str, Any], alert: str, value: float, what: str) -> None:
    outcome = _post(reactor, alert, value=value, gpus=4)
    assert (outcome["reason"], outcome["workload"]) == ("operator-forbids", f"JobSet/{NAMESPACE}/train"), outcome
    assert "JobSet webhook keeps spec.replicatedJobs immutable" in outcome["detail"] and what in outcome["detail"]
    assert custom(reactor.sim, "jobsets", "train")["spec"] == jobset["spec"]
    assert not [k for k in reactor.sim.requests if k[0] == "patch" and k[1] in ("jobsets", "jobs", "pods")]


def test_plan_explains_the_refusal(reactor: Reactor, jobset: dict[str, Any]) -> None:
    """`reactor plan`: the engine in dry run, printed; the refusal and the webhook's rule are in the text."""
    settings = reactor.service.engine.settings
    dry = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    engine = build_engine(dry, kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, _pod(reactor), "trainer", 0.1, 4)])
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(body)), dry)
    text = out.getvalue()
    assert "workload: JobSet/ml-workloads/train" in text and "operator-forbids" in text, text
    assert "JobSet webhook keeps spec.replicatedJobs immutable" in text


def test_a_job_without_the_jobset_label_is_not_believed(reactor: Reactor, jobset: dict[str, Any]) -> None:
    job = reactor.sim.get("jobs", NAMESPACE, "train-workers-0")
    del job["metadata"]["labels"][JOBSET]
    reactor.sim.apply(job)
    pods = reactor.sim.list("pods", NAMESPACE, label_selector="jobset.sigs.k8s.io/job-index=0")
    r = reactor.post(notification([AlertSpec("GPUUnderutilized", NAMESPACE, pods[0]["metadata"]["name"], "trainer",
                                             0.1, 4)]))
    (outcome,) = r.get_json()["outcomes"]
    assert outcome["reason"] == "owner-unverified" and f"{JOBSET}=train" in outcome["detail"], outcome


def _kueue_jobset(reactor: Reactor) -> dict[str, Any]:
    """Kueue installed with two WorkloadPriorityClasses, and the JobSet queued at the lower one."""
    install(reactor.sim, "kueue.x-k8s.io-v1beta2.yaml")  # Kueue v0.15+: the label may change
    for name, value in (("wpc-low", 100), ("wpc-high", 1000)):
        reactor.sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                           "metadata": {"name": name}, "value": value})
    return _apply(reactor, {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"})


def test_a_jobset_kueue_manages_changes_priority_through_kueues_label(kueue_reactor: Reactor) -> None:
    reactor = kueue_reactor
    before = _kueue_jobset(reactor)
    outcome = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"JobSet/{NAMESPACE}/train"), outcome
    after = custom(reactor.sim, "jobsets", "train")
    assert after["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-high"
    assert after["spec"] == before["spec"]  # the webhook's business untouched: only a label changed


def test_kueues_priority_label_is_put_back_when_the_saturation_resolves(kueue_reactor: Reactor) -> None:
    """The one change a JobSet takes is revertible like any priority boost: the resolved alert restores the label
    recorded as the original, still without touching the spec."""
    reactor = kueue_reactor
    before = _kueue_jobset(reactor)
    assert _post(reactor, "GPUSaturated", value=0.99, gpus=4)["result"] == "applied"
    outcome = _post(reactor, "GPUSaturated", value=0.99, gpus=4, status="resolved")
    assert (outcome["result"], outcome.get("action")) == ("applied", "revert"), outcome
    after = custom(reactor.sim, "jobsets", "train")
    assert after["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-low"
    assert after["spec"] == before["spec"]


def test_a_look_alike_job_cannot_move_another_teams_kueue_priority(kueue_reactor: Reactor) -> None:
    """Issue 24 item 8, as a tenant: a Job carrying the JobSet's uid and every label the JobSet controller sets, but
    not a name it gives (`<jobset>-<replicatedJob>-<index>`, placement.GenJobName) nor an index it has."""
    from tests.adapters.operators import owner_ref
    reactor = kueue_reactor
    before = _kueue_jobset(reactor)
    for name, index in (("mine", "0"), ("train-workers-7", "7")):
        labels = {JOBSET: "train", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                  "jobset.sigs.k8s.io/job-index": index}
        reactor.sim.apply({"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                                        "ownerReferences": owner_ref(before)},
                           "spec": {"template": {"metadata": {"labels": labels},
                                                 "spec": {"restartPolicy": "Never",
                                                          "containers": [container("trainer", 4)]}}}})
        reactor.sim.settle()
        (pod,) = [p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE, label_selector=f"job-name={name}")]
        r = reactor.post(notification([AlertSpec("GPUSaturated", NAMESPACE, pod, "trainer", value=0.99, gpus=4)]))
        (outcome,) = r.get_json()["outcomes"]
        assert outcome["reason"] == "owner-unverified", outcome
    after = custom(reactor.sim, "jobsets", "train")
    assert after["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "wpc-low"


def test_on_kueue_v0_14_a_jobsets_priority_label_is_refused_by_name(kueue_reactor: Reactor) -> None:
    reactor = kueue_reactor
    install(reactor.sim, "kueue.x-k8s.io.yaml")  # v1beta1 only: Kueue v0.14 and older
    for name, value in (("wpc-low", 100), ("wpc-high", 1000)):
        reactor.sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                           "metadata": {"name": name}, "value": value})
    _apply(reactor, {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"})
    outcome = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "immutable" in outcome["detail"], outcome


def test_a_job_of_another_restart_attempt_is_not_one_of_the_jobsets_current_run() -> None:
    """On a restart the JobSet controller deletes every Job and creates them again under the same names, labelled with
    the new attempt (jobset_controller.go labelAndAnnotateObject: RestartsKey = status.restarts; getChildJobs counts a
    lower one as previous). A Job named right but labelled with another attempt is not of the current run. The label
    is no proof of ownership: the name rule (`job_set`) does not read it, and a Job carrying the current attempt is
    judged by its name alone."""
    from reactor.integrations.adapters import naming

    owner = {"metadata": {"name": "train"}, "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2}]},
             "status": {"restarts": 1}}

    def job(attempt: str | None) -> dict[str, Any]:
        labels = {naming.JOBSET_REPLICATED_JOB: "workers", naming.JOBSET_JOB_INDEX: "1"}
        if attempt is not None:
            labels[naming.JOBSET_RESTARTS] = attempt
        return {"metadata": {"name": "train-workers-1", "labels": labels}}

    assert naming.job_set_attempt(owner, job("1")) is None
    for attempt, which in (("0", "a previous restart attempt"), (None, "no restart attempt"), ("2", "no restart")):
        refused = naming.job_set_attempt(owner, job(attempt))
        assert refused is not None and "restart attempt 1" in refused and which in refused, attempt
        assert naming.job_set(owner, "Job", job(attempt)) is None  # the name rule: the label plays no part
    assert naming.job_set_attempt({**owner, "status": {}}, job("0")) is None  # never restarted: attempt 0
