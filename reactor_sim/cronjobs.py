"""The CronJob controller without a clock-driven schedule: `trigger` starts the run a schedule would
(a Job `<cronjob>-<minutes since the epoch>` from the jobTemplate, controlled by the CronJob, honouring
suspend and concurrencyPolicy); `sync` keeps `status.active` and `lastSuccessfulTime` and removes
finished Jobs beyond the history limits, with the upstream Events.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reactor_sim import events, jobs
from reactor_sim.operations import Api
from reactor_sim.ownership import controlled_by, owner_ref
from reactor_sim.status import ApiError

Obj = dict[str, Any]
COMPONENT = "cronjob-controller"
SCHEDULED_AT = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def sync_all(api: Api) -> None:
    for cronjob in api.store.items("cronjobs"):
        sync(api, cronjob)


def owned_jobs(api: Api, cronjob: Obj) -> list[Obj]:
    return [j for j in api.store.items("jobs", cronjob["metadata"]["namespace"]) if controlled_by(j, cronjob)]


def sync(api: Api, cronjob: Obj) -> None:
    current = api.store.get("cronjobs", cronjob["metadata"]["namespace"], cronjob["metadata"]["name"])
    if current is None:
        return
    children = owned_jobs(api, current)
    status = copy.deepcopy(current.get("status") or {})
    _reconcile_active(api, current, status, children)
    if status != (current.get("status") or {}):
        current["status"] = status
        api.controller_write("cronjobs", current)
    _clean_history(api, current, children)


def _reconcile_active(api: Api, cronjob: Obj, status: Obj, children: list[Obj]) -> None:
    active = list(status.get("active") or [])
    by_uid = {j["metadata"]["uid"]: j for j in children}
    for ref in list(active):
        job = by_uid.get(ref.get("uid"))
        if job is None:
            events.record(api, cronjob, type_="Normal", reason="MissingJob",
                          message=f"Active job went missing: {ref.get('name')}", component=COMPONENT)
            active.remove(ref)
        elif (outcome := jobs.finished(job)) is not None:
            events.record(api, cronjob, type_="Normal", reason="SawCompletedJob",
                          message=f"Saw completed job: {ref.get('name')}, condition: {outcome}", component=COMPONENT)
            active.remove(ref)
    if active:
        status["active"] = active
    else:
        status.pop("active", None)
    done = [j["status"]["completionTime"] for j in children
            if jobs.finished(j) == "Complete" and (j.get("status") or {}).get("completionTime")]
    if done and max(done) > status.get("lastSuccessfulTime", ""):
        status["lastSuccessfulTime"] = max(done)


def _clean_history(api: Api, cronjob: Obj, children: list[Obj]) -> None:
    """removeOldestJobs: keep the newest finished Jobs (by start time) up to each history limit."""
    spec = cronjob["spec"]
    for outcome, limit_key in (("Complete", "successfulJobsHistoryLimit"), ("Failed", "failedJobsHistoryLimit")):
        limit = spec.get(limit_key)
        done = [j for j in children if jobs.finished(j) == outcome]
        if limit is None or len(done) <= int(limit):
            continue
        done.sort(key=lambda j: ((j.get("status") or {}).get("startTime") or "", j["metadata"]["name"]))
        for job in done[:len(done) - int(limit)]:
            _delete_job(api, cronjob, job)


def _delete_job(api: Api, cronjob: Obj, job: Obj) -> None:
    api.delete(api.registry.by_plural("jobs"), job["metadata"]["namespace"], job["metadata"]["name"])
    events.record(api, cronjob, type_="Normal", reason="SuccessfulDelete",
                  message=f"Deleted job {job['metadata']['name']}", component=COMPONENT)


def trigger(api: Api, namespace: str, name: str, at: datetime | None = None) -> Obj | None:
    """The run the schedule would start at `at` (default: this minute); None where the CronJob is
    suspended or a run is active under concurrencyPolicy Forbid."""
    cronjob = api.get(api.registry.by_plural("cronjobs"), namespace, name)
    spec = cronjob["spec"]
    scheduled = (at or api.clock()).astimezone(UTC).replace(second=0, microsecond=0)
    sync(api, cronjob)
    cronjob = api.get(api.registry.by_plural("cronjobs"), namespace, name)
    active = (cronjob.get("status") or {}).get("active") or []
    if spec.get("suspend"):
        return None
    if spec.get("concurrencyPolicy") == "Forbid" and active:
        events.record(api, cronjob, type_="Normal", reason="JobAlreadyActive", component=COMPONENT,
                      message="Not starting job because prior execution is running and concurrency policy is Forbid")
        return None
    if spec.get("concurrencyPolicy") == "Replace":
        for ref in active:
            job = api.store.get("jobs", namespace, ref.get("name", ""))
            if job is not None:
                _delete_job(api, cronjob, job)
        sync(api, cronjob)
        cronjob = api.get(api.registry.by_plural("cronjobs"), namespace, name)
    return _start(api, cronjob, scheduled)


def job_name(cronjob: Obj, scheduled: datetime) -> str:
    return f"{cronjob['metadata']['name']}-{int(scheduled.timestamp()) // 60}"


def _start(api: Api, cronjob: Obj, scheduled: datetime) -> Obj:
    template = copy.deepcopy(cronjob["spec"].get("jobTemplate") or {})
    meta = template.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    annotations[SCHEDULED_AT] = _rfc3339(scheduled, cronjob["spec"].get("timeZone"))
    job: Obj = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": job_name(cronjob, scheduled), "namespace": cronjob["metadata"]["namespace"],
                        "labels": dict(meta.get("labels") or {}), "annotations": annotations,
                        "ownerReferences": [owner_ref(cronjob)]},
           "spec": template.get("spec") or {}}
    try:
        created = api.create(api.registry.by_plural("jobs"), cronjob["metadata"]["namespace"], job)
    except ApiError as e:
        existing = api.store.get("jobs", cronjob["metadata"]["namespace"], job["metadata"]["name"])
        if e.reason == "AlreadyExists" and existing is not None and controlled_by(existing, cronjob):
            return existing  # this minute's run was already started
        events.record(api, cronjob, type_="Warning", reason="FailedCreate", message=f"Error creating job: {e.message}",
                      component=COMPONENT)
        raise
    events.record(api, cronjob, type_="Normal", reason="SuccessfulCreate",
                  message=f"Created job {created['metadata']['name']}", component=COMPONENT)
    current = api.get(api.registry.by_plural("cronjobs"), cronjob["metadata"]["namespace"], cronjob["metadata"]["name"])
    status = current.setdefault("status", {})
    meta = created["metadata"]
    status["active"] = [*(status.get("active") or []),
                        {"kind": "Job", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                         "apiVersion": "batch/v1", "resourceVersion": meta["resourceVersion"]}]
    status["lastScheduleTime"] = scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
    api.controller_write("cronjobs", current)
    return created


def _rfc3339(moment: datetime, zone: str | None) -> str:
    try:
        local = moment.astimezone(ZoneInfo(zone)) if zone else moment
    except (ZoneInfoNotFoundError, ValueError):
        local = moment
    text = local.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
