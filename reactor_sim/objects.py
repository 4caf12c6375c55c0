"""Per-kind storage strategy: what create resets, which kinds carry `generation`, and the status
each kind starts with. Pure functions on object dicts, no store access.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Clock = Callable[[], datetime]

GENERATION_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob", "DaemonSet"})
# Create resets status for these (PrepareForCreate); Node keeps what it is given (capacity/allocatable).
RESET_STATUS_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob",
                                "HorizontalPodAutoscaler", "ResourceQuota"})
# Status fields without `omitempty` upstream: a fresh object serialises them as 0.
REQUIRED_STATUS: dict[str, Obj] = {"ReplicaSet": {"replicas": 0},
                                   "StatefulSet": {"replicas": 0, "availableReplicas": 0},
                                   "HorizontalPodAutoscaler": {"currentReplicas": 0, "desiredReplicas": 0}}
NO_UNCONDITIONAL_UPDATE = frozenset({"leases"})


def timestamp(clock: Clock) -> str:
    return clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_timestamp(clock: Clock) -> str:
    return clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


QOS_RESOURCES = ("cpu", "memory")


def qos_class(pod: Obj) -> str:
    """ComputePodQOS (pkg/apis/core/helper/qos): only positive cpu and memory quantities count,
    summed over containers and init containers. Guaranteed when every container limits both and the
    summed requests equal the summed limits; BestEffort when nothing is set; else Burstable."""
    from reactor_sim.quantity import parse

    def positive(values: object) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, raw in (values or {}).items() if isinstance(values, dict) else ():
            try:
                value = parse(raw)
            except ValueError:
                continue
            if name in QOS_RESOURCES and value > 0:
                out[name] = value
        return out

    spec = pod.get("spec") or {}
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for name, value in positive(res.get("requests")).items():
            requests[name] = requests.get(name, 0) + value
        found = positive(res.get("limits"))
        for name, value in found.items():
            limits[name] = limits.get(name, 0) + value
        if not set(QOS_RESOURCES) <= set(found):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and len(requests) == len(limits) and all(limits.get(k) == v for k, v in requests.items()):
        return "Guaranteed"
    return "Burstable"


def initial_status(obj: Obj) -> Obj | None:
    """The status a freshly created object starts with, or None to keep the one given."""
    kind = obj.get("kind")
    if kind == "Pod":
        return {"phase": "Pending", "qosClass": qos_class(obj)}
    if kind == "Namespace":
        return {"phase": "Active"}
    if kind in RESET_STATUS_KINDS:
        return dict(REQUIRED_STATUS.get(kind, {}))
    return None


def prepare_create(obj: Obj, *, uid: str, clock: Clock) -> None:
    meta = obj["metadata"]
    meta["uid"] = uid
    meta["creationTimestamp"] = timestamp(clock)
    meta.pop("resourceVersion", None)
    meta.pop("deletionTimestamp", None)
    if obj.get("kind") in GENERATION_KINDS:
        meta["generation"] = 1
    status = initial_status(obj)
    if status is not None:
        obj["status"] = status
    if obj.get("kind") == "Pod":
        obj["spec"].setdefault("restartPolicy", "Always")
        obj["spec"].setdefault("schedulerName", "default-scheduler")
        obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
        obj["spec"].setdefault("dnsPolicy", "ClusterFirst")
    if obj.get("kind") == "Job":
        generate_job_selector(obj)
    if obj.get("kind") == "Namespace":
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]


def prepare_update(old: Obj, new: Obj, *, has_status: bool) -> None:
    """Carry over what a client may not change through the main resource."""
    meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
    for key in ("uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    if old.get("kind") in GENERATION_KINDS and old.get("spec") != new.get("spec"):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1


def strip_rv(obj: Obj) -> Obj:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return out


def default_workload(obj: Obj) -> None:
    """Decode-time defaults of apps/v1 workloads (replicas, strategy, history limits), and a PriorityClass's
    preemptionPolicy (kubernetes pkg/apis/scheduling/v1/defaults.go `SetDefaults_PriorityClass`)."""
    kind, spec = obj.get("kind"), obj.get("spec")
    if kind == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        return
    if not isinstance(spec, dict):
        return
    if kind == "Deployment":
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == "StatefulSet":
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        update = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if update.get("type") == "RollingUpdate":
            update.setdefault("rollingUpdate", {}).setdefault("partition", 0)
        spec.setdefault("revisionHistoryLimit", 10)
    elif kind == "ReplicaSet":
        spec.setdefault("replicas", 1)
    elif kind == "Job":
        _default_job(spec)
    elif kind == "CronJob":
        for key, value in (("concurrencyPolicy", "Allow"), ("suspend", False), ("successfulJobsHistoryLimit", 3),
                           ("failedJobsHistoryLimit", 1)):
            spec.setdefault(key, value)


def _default_job(spec: Obj) -> None:
    """SetDefaults_Job: one pod to one completion unless told, 6 retries, NonIndexed, not suspended."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None and spec.get("backoffLimitPerIndex") is None:
        spec["backoffLimit"] = 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")


JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def generate_job_selector(job: Obj) -> None:
    """The Job strategy's generateSelector: template labels naming the Job and its uid, a selector on the
    uid; then the Job takes its template's labels if it has none (what a read-back defaulting shows)."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") or not isinstance(spec.get("template"), dict):
        return
    meta = job["metadata"]
    labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, meta["name"])
    for key in CONTROLLER_UID_LABELS:
        labels.setdefault(key, meta["uid"])
    selector = spec.setdefault("selector", {})
    selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID_LABELS[1], meta["uid"])
    if not meta.get("labels"):
        meta["labels"] = dict(labels)


def set_condition(conditions: list[Obj], ctype: str, status: str, reason: str, message: str,
                  now: str, *, update_time: bool = False) -> list[Obj]:
    """Conditions with one replaced; timestamps move only when status, reason or message change."""
    out = [dict(c) for c in conditions if c.get("type") != ctype]
    old = next((c for c in conditions if c.get("type") == ctype), None)
    cond: Obj = {"type": ctype, "status": status, "reason": reason, "message": message}
    if old and old.get("status") == status and old.get("reason") == reason and old.get("message") == message:
        return [dict(c) for c in conditions]
    if update_time:
        cond["lastUpdateTime"] = now
    cond["lastTransitionTime"] = old["lastTransitionTime"] if old and old.get("status") == status \
        and "lastTransitionTime" in old else now
    out.append(cond)
    return out


def drop_condition(conditions: list[Obj], ctype: str) -> list[Obj]:
    return [c for c in conditions if c.get("type") != ctype]
