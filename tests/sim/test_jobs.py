"""The Job and CronJob controllers (pkg/controller/job, pkg/controller/cronjob/cronjob_controllerv2.go)
driven by settle(), with `trigger_cronjob` standing in for the schedule and `finish_pod` for the kubelet."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, container
from tests.sim.helpers import status_of


def job(name: str = "train", gpus: int = 1, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"template": {"spec": {"restartPolicy": restart, "containers": [container(gpus=gpus)]}}, **spec}}


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"team": "ml"}},
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container(gpus=2)]}}}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedule": "0 2 * * *", "jobTemplate": template, **spec}}


def pods_of(sim: SimCluster, owner: str) -> list[dict[str, Any]]:
    return [p for p in sim.list("pods", "ml") if p["metadata"]["ownerReferences"][0]["name"] == owner]


def reasons(sim: SimCluster, name: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in sim.list("events", "ml") if e["involvedObject"]["name"] == name]


AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


# -- Job ----------------------------------------------------------------------------------------------


def test_job_creates_its_pod_through_admission_with_a_controller_reference(sim: SimCluster, client: k8s.ApiClient) -> None:
    """A Job gets its defaults (completions/parallelism 1, backoffLimit 6), a selector on its uid and template
    labels `batch.kubernetes.io/controller-uid`/`job-name`; the controller creates pod `<job>-<5 chars>` with a
    controller ownerReference, a `SuccessfulCreate` Event `Created pod: …`, and status active/ready/startTime."""
    created = k8s.BatchV1Api(client).create_namespaced_job("ml", job())
    uid = created.metadata.uid
    assert (created.spec.completions, created.spec.parallelism, created.spec.backoff_limit) == (1, 1, 6)
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert created.spec.template.metadata.labels == {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                                                     "batch.kubernetes.io/job-name": "train", "job-name": "train"}
    sim.settle()
    (pod,) = sim.list("pods", "ml")
    assert re.fullmatch(r"train-[a-z0-9]{5}", pod["metadata"]["name"])
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid,
                                                   "controller": True, "blockOwnerDeletion": True}]
    assert pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == uid
    assert pod["status"]["phase"] == "Running"
    status = sim.get("jobs", "ml", "train")["status"]
    assert (status["active"], status["ready"], status["terminating"]) == (1, 1, 0) and status["startTime"]
    assert reasons(sim, "train") == [("SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")]


def test_job_pods_are_denied_by_quota_with_a_failed_create_event(sim: SimCluster) -> None:
    """Job pods go through admission like any pod: over quota, a `FailedCreate` Warning
    `Error creating: pods "train-…" is forbidden: exceeded quota: …` and no pod."""
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
               "spec": {"hard": {f"requests.{GPU}": "2"}}})
    sim.apply(job(gpus=4))
    sim.settle()
    assert sim.list("pods", "ml") == []
    ((reason, message),) = reasons(sim, "train")
    assert reason == "FailedCreate"
    assert re.fullmatch(r'Error creating: pods "train-\w{5}" is forbidden: exceeded quota: q, requested: '
                        r"requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2",
                        message)


def test_job_completes_when_its_pods_succeed(sim: SimCluster) -> None:
    """completions 2, parallelism 1: one pod at a time; after two succeed the Job has conditions
    SuccessCriteriaMet and Complete (`CompletionsReached`, `Reached expected number of succeeded pods`),
    completionTime, succeeded 2, and a `Completed` Event `Job completed`. Finished pods stay."""
    sim.apply(job(completions=2))
    sim.settle()
    for _ in range(2):
        (running,) = [p for p in pods_of(sim, "train") if p["status"]["phase"] == "Running"]
        sim.finish_pod("ml", running["metadata"]["name"], exit_code=0)
        sim.settle()
    status = sim.get("jobs", "ml", "train")["status"]
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
        ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]
    assert status["succeeded"] == 2 and "active" not in status and status["completionTime"]
    assert sorted(p["status"]["phase"] for p in pods_of(sim, "train")) == ["Succeeded", "Succeeded"]
    assert ("Completed", "Job completed") in reasons(sim, "train")


def test_job_fails_past_its_backoff_limit(sim: SimCluster) -> None:
    """More failed pods than backoffLimit: FailureTarget and Failed conditions `BackoffLimitExceeded`,
    `Job has reached the specified backoff limit`, a Warning Event of that reason, no new pod."""
    sim.apply(job(backoffLimit=1))
    sim.settle()
    for _ in range(2):
        (running,) = [p for p in pods_of(sim, "train") if p["status"]["phase"] == "Running"]
        sim.finish_pod("ml", running["metadata"]["name"], exit_code=1)
        sim.settle()
    status = sim.get("jobs", "ml", "train")["status"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
    assert status["failed"] == 2 and "active" not in status
    assert [p["status"]["phase"] for p in pods_of(sim, "train")] == ["Failed", "Failed"]
    assert ("BackoffLimitExceeded", "Job has reached the specified backoff limit") in reasons(sim, "train")


def test_on_failure_restarts_the_container_in_place(sim: SimCluster) -> None:
    """restartPolicy OnFailure: a failed container restarts in the same pod (restartCount 1), the pod stays
    Running and the Job keeps its one pod."""
    sim.apply(job(restart="OnFailure"))
    sim.settle()
    (pod,) = pods_of(sim, "train")
    after = sim.finish_pod("ml", pod["metadata"]["name"], exit_code=1)
    sim.settle()
    assert after["status"]["phase"] == "Running"
    assert after["status"]["containerStatuses"][0]["restartCount"] == 1
    assert after["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1
    assert [p["metadata"]["name"] for p in pods_of(sim, "train")] == [pod["metadata"]["name"]]


def test_a_job_must_not_restart_always(client: k8s.ApiClient) -> None:
    """ValidateJobSpec: `spec.template.spec.restartPolicy: Unsupported value: "Always": supported values:
    "OnFailure", "Never"` (an unset policy is defaulted to Always first)."""
    body = job()
    del body["spec"]["template"]["spec"]["restartPolicy"]
    status = status_of(lambda: k8s.BatchV1Api(client).create_namespaced_job("ml", body), 422)
    assert status["message"] == ('Job.batch "train" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
                                 '"Always": supported values: "OnFailure", "Never"')
    assert status["details"]["causes"] == [{"reason": "FieldValueNotSupported", "field": "spec.template.spec.restartPolicy",
                                            "message": 'Unsupported value: "Always": supported values: "OnFailure", "Never"'}]


def test_deleting_a_job_removes_its_pods(sim: SimCluster) -> None:
    sim.apply(job())
    sim.settle()
    sim.delete("jobs", "ml", "train")
    sim.settle()
    assert sim.list("pods", "ml") == []


# -- CronJob ------------------------------------------------------------------------------------------


def test_trigger_creates_the_scheduled_job_from_the_template(sim: SimCluster) -> None:
    """getJobFromTemplate2: Job `<cronjob>-<scheduled time in minutes since the epoch>`, the jobTemplate's labels
    and annotations plus `batch.kubernetes.io/cronjob-scheduled-timestamp`, a controller reference to the
    CronJob; the CronJob's status lists it as active with lastScheduleTime; Event `Created job …`."""
    sim.apply(cronjob())
    cj = sim.get("cronjobs", "ml", "nightly")
    assert (cj["spec"]["concurrencyPolicy"], cj["spec"]["successfulJobsHistoryLimit"],
            cj["spec"]["failedJobsHistoryLimit"], cj["spec"]["suspend"]) == ("Allow", 3, 1, False)
    created = sim.trigger_cronjob("ml", "nightly", at=AT)
    assert created is not None
    name = f"nightly-{int(AT.timestamp()) // 60}"
    assert created["metadata"]["name"] == name == "nightly-29933400"
    assert created["metadata"]["labels"] == {"team": "ml"}
    assert created["metadata"]["annotations"] == {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-11-30T02:00:00Z"}
    assert created["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                                                       "uid": cj["metadata"]["uid"], "controller": True,
                                                       "blockOwnerDeletion": True}]
    status = sim.get("cronjobs", "ml", "nightly")["status"]
    assert [(a["kind"], a["name"]) for a in status["active"]] == [("Job", name)]
    assert status["lastScheduleTime"] == "2026-11-30T02:00:00Z"
    sim.settle()
    (pod,) = sim.list("pods", "ml")
    assert pod["metadata"]["name"].startswith(name + "-")
    assert pod["spec"]["containers"][0]["resources"]["limits"][GPU] == "2"
    assert reasons(sim, "nightly") == [("SuccessfulCreate", f"Created job {name}")]


def test_the_next_run_takes_the_changed_template(sim: SimCluster) -> None:
    """A jobTemplate change reaches only Jobs started after it; a running Job keeps its template."""
    sim.apply(cronjob())
    first = sim.trigger_cronjob("ml", "nightly", at=AT)
    cj = sim.get("cronjobs", "ml", "nightly")
    cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {GPU: "1"}, "requests": {GPU: "1"}}
    sim.apply(cj)
    second = sim.trigger_cronjob("ml", "nightly", at=AT.replace(day=29))
    assert first is not None and second is not None
    gpus = {j["metadata"]["name"]: j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU]
            for j in sim.list("jobs", "ml")}
    assert gpus == {first["metadata"]["name"]: "2", second["metadata"]["name"]: "1"}


def test_forbid_skips_a_run_while_one_is_active(sim: SimCluster) -> None:
    """concurrencyPolicy Forbid: no Job while a run is active, Event `JobAlreadyActive`; once the run completed
    (`SawCompletedJob` … `condition: Complete`, lastSuccessfulTime), the next trigger starts one."""
    sim.apply(cronjob(concurrencyPolicy="Forbid"))
    first = sim.trigger_cronjob("ml", "nightly", at=AT)
    sim.settle()
    assert sim.trigger_cronjob("ml", "nightly", at=AT.replace(day=29)) is None
    assert ("JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid") \
        in reasons(sim, "nightly")
    assert first is not None
    (pod,) = sim.list("pods", "ml")
    sim.finish_pod("ml", pod["metadata"]["name"])
    sim.settle()
    status = sim.get("cronjobs", "ml", "nightly")["status"]
    assert "active" not in status and status["lastSuccessfulTime"]
    assert ("SawCompletedJob", f"Saw completed job: {first['metadata']['name']}, condition: Complete") in reasons(sim, "nightly")
    assert sim.trigger_cronjob("ml", "nightly", at=AT.replace(day=29)) is not None


def test_replace_deletes_the_active_run(sim: SimCluster) -> None:
    """concurrencyPolicy Replace: the active Job is deleted (`SuccessfulDelete`, `Deleted job …`) and a new one
    started; its pods go with it."""
    sim.apply(cronjob(concurrencyPolicy="Replace"))
    first = sim.trigger_cronjob("ml", "nightly", at=AT)
    sim.settle()
    second = sim.trigger_cronjob("ml", "nightly", at=AT.replace(day=29))
    sim.settle()
    assert first is not None and second is not None
    assert [j["metadata"]["name"] for j in sim.list("jobs", "ml")] == [second["metadata"]["name"]]
    assert ("SuccessfulDelete", f"Deleted job {first['metadata']['name']}") in reasons(sim, "nightly")
    assert [p["metadata"]["ownerReferences"][0]["name"] for p in sim.list("pods", "ml")] == [second["metadata"]["name"]]


def test_a_suspended_cronjob_starts_nothing(sim: SimCluster) -> None:
    sim.apply(cronjob(suspend=True))
    assert sim.trigger_cronjob("ml", "nightly", at=AT) is None
    assert sim.list("jobs", "ml") == []


def test_triggering_the_same_minute_twice_starts_one_job(sim: SimCluster) -> None:
    """The Job name is the lock: a second trigger for the same scheduled minute returns the same Job."""
    sim.apply(cronjob())
    first, again = sim.trigger_cronjob("ml", "nightly", at=AT), sim.trigger_cronjob("ml", "nightly", at=AT)
    assert first is not None and again is not None and first["metadata"]["uid"] == again["metadata"]["uid"]
    assert len(sim.list("jobs", "ml")) == 1


def test_finished_jobs_beyond_the_history_limits_are_deleted(sim: SimCluster) -> None:
    """removeOldestJobs: successfulJobsHistoryLimit 1 keeps the newest successful run; failedJobsHistoryLimit
    applies to failed runs separately."""
    sim.apply(cronjob(successfulJobsHistoryLimit=1))
    names = []
    for day in (27, 28, 29):
        started = sim.trigger_cronjob("ml", "nightly", at=AT.replace(day=day))
        assert started is not None
        names.append(started["metadata"]["name"])
        sim.settle()
        (pod,) = [p for p in sim.list("pods", "ml") if p["status"]["phase"] == "Running"]
        sim.finish_pod("ml", pod["metadata"]["name"])
        sim.settle()
    assert [j["metadata"]["name"] for j in sim.list("jobs", "ml")] == [names[-1]]
    deleted = [m for r, m in reasons(sim, "nightly") if r == "SuccessfulDelete"]
    assert deleted == [f"Deleted job {names[0]}", f"Deleted job {names[1]}"]
