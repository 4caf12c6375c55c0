"""The Job controller: up to `parallelism` pods `<job>-<5 chars>` at a time, created through admission,
until `completions` pods succeeded (Complete) or more than `backoffLimit` failed (Failed).

Pods only finish when a test says so (`SimCluster.finish_pod`): the kubelet here runs them forever.
Finished pods stay, as they do upstream until the Job goes. NonIndexed completion only.
"""

from __future__ import annotations

import copy
from typing import Any

from reactor_sim import events
from reactor_sim.objects import set_condition, timestamp
from reactor_sim.operations import Api
from reactor_sim.ownership import controlled_by, is_active, is_ready, pod_from_template
from reactor_sim.status import ApiError

Obj = dict[str, Any]
COMPONENT = "job-controller"
COMPLETE = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def sync_all(api: Api) -> None:
    for job in api.store.items("jobs"):
        sync(api, job)


def finished(job: Obj) -> str | None:
    """`Complete` or `Failed` once the Job has finished, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def owned_pods(api: Api, job: Obj) -> list[Obj]:
    return [copy.deepcopy(p) for _, p in api.store.dependents(job["metadata"]["uid"], "pods") if controlled_by(p, job)]


def sync(api: Api, job: Obj) -> None:
    pods = owned_pods(api, job)
    active = [p for p in pods if is_active(p)]
    spec = job["spec"]
    if finished(job) is None:
        outcome = _outcome(spec, pods, active)
        if outcome is not None or spec.get("suspend"):
            _delete(api, active)
            active = []
        if outcome is not None:
            _finish(api, job, outcome)
        elif not spec.get("suspend"):
            active += _create_missing(api, job, _wanted(spec, pods, active) - len(active))
    _write_status(api, job)


def _count(pods: list[Obj], phase: str) -> int:
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == phase)


def _restarts(pods: list[Obj]) -> int:
    return sum(int(c.get("restartCount", 0))
               for p in pods for c in (p.get("status") or {}).get("containerStatuses") or [])


def _outcome(spec: Obj, pods: list[Obj], active: list[Obj]) -> str | None:
    """Failed past the backoff limit (failed pods, plus container restarts under OnFailure), or Complete."""
    failures = _count(pods, "Failed")
    if spec["template"]["spec"].get("restartPolicy") == "OnFailure":
        failures += _restarts(active)
    if failures > int(spec.get("backoffLimit", 6)):
        return "Failed"
    succeeded, completions = _count(pods, "Succeeded"), spec.get("completions")
    done = succeeded >= int(completions) if completions is not None else succeeded > 0 and not active
    return "Complete" if done else None


def _wanted(spec: Obj, pods: list[Obj], active: list[Obj]) -> int:
    parallelism, completions = int(spec.get("parallelism", 1)), spec.get("completions")
    if completions is None:
        return len(active) if _count(pods, "Succeeded") else parallelism
    return max(0, min(parallelism, int(completions) - _count(pods, "Succeeded")))


def _create_missing(api: Api, job: Obj, count: int) -> list[Obj]:
    created: list[Obj] = []
    for _ in range(max(0, count)):
        pod = pod_from_template(job["spec"]["template"], job, job["metadata"]["namespace"])
        pod["metadata"]["generateName"] = job["metadata"]["name"] + "-"
        try:
            created.append(api.create(api.registry.by_plural("pods"), job["metadata"]["namespace"], pod))
        except ApiError as e:
            events.record(api, job, type_="Warning", reason="FailedCreate", message=f"Error creating: {e.message}",
                          component=COMPONENT)
            break
        events.record(api, job, type_="Normal", reason="SuccessfulCreate",
                      message=f"Created pod: {created[-1]['metadata']['name']}", component=COMPONENT)
    return created


def _delete(api: Api, pods: list[Obj]) -> None:
    for pod in pods:
        api.delete(api.registry.by_plural("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"])


def _finish(api: Api, job: Obj, outcome: str) -> None:
    current = api.store.get("jobs", job["metadata"]["namespace"], job["metadata"]["name"])
    if current is None:
        return
    now = timestamp(api.clock)
    status = current.setdefault("status", {})
    conds = status.get("conditions") or []
    (reason, message), first = (COMPLETE, "SuccessCriteriaMet") if outcome == "Complete" else (BACKOFF, "FailureTarget")
    for ctype in (first, outcome):
        conds = set_condition(conds, ctype, "True", reason, message, now)
        conds[-1]["lastProbeTime"] = now
    status["conditions"] = conds
    if outcome == "Complete":
        status["completionTime"] = now
        events.record(api, current, type_="Normal", reason="Completed", message="Job completed", component=COMPONENT)
    else:
        events.record(api, current, type_="Warning", reason=reason, message=message, component=COMPONENT)
    api.controller_write("jobs", current)


def _write_status(api: Api, job: Obj) -> None:
    current = api.store.get("jobs", job["metadata"]["namespace"], job["metadata"]["name"])
    if current is None:
        return
    pods = owned_pods(api, current)
    active = [p for p in pods if is_active(p)]
    old = current.get("status") or {}
    status: Obj = {k: v for k, v in old.items() if k in ("conditions", "completionTime", "startTime")}
    if "startTime" not in status and not current["spec"].get("suspend"):
        status["startTime"] = timestamp(api.clock)
    counts = {"active": len(active), "succeeded": _count(pods, "Succeeded"), "failed": _count(pods, "Failed")}
    status.update({k: v for k, v in counts.items() if v})
    status.update(ready=sum(1 for p in active if is_ready(p)), terminating=0, uncountedTerminatedPods={})
    conds = status.get("conditions") or []
    if current["spec"].get("suspend") and finished(current) is None:
        status["conditions"] = set_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended",
                                             timestamp(api.clock))
    elif any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conds):
        status["conditions"] = set_condition(conds, "Suspended", "False", "JobResumed", "Job resumed",
                                             timestamp(api.clock))
    if old != status:
        current["status"] = status
        api.controller_write("jobs", current)
