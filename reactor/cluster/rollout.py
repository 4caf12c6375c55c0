"""How far a workload's rollout has got, read from the status its controller writes.

Pure: plain dicts in, a `Progress` value out; no I/O, no clock. Kept apart from `workloads.py`
(what the policy decides on) because only the verifier reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reactor.core.model import Kind


@dataclass(frozen=True, slots=True)
class Progress:
    """`done`: the new template is fully rolled out. `trouble`: what the controller reports holding it up.
    `actuating`: a kubelet is applying the change right now (an in-place resize `PodResizeInProgress`): not done,
    and not stalled either, so never reverted mid-way."""

    done: bool
    trouble: str = ""
    actuating: bool = False
    pods: tuple[str, ...] = ()  # the pods an in-place change has not reached: what a revert resizes back


def progress(obj: Mapping[str, Any], kind: str) -> Progress:
    """Deployment: the controller's DeploymentComplete; StatefulSet: currentRevision = updateRevision and every
    replica ready; a CronJob has nothing to roll out (its next run uses the new template): done at once."""
    if kind == Kind.CRONJOB:
        return Progress(True)
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = _int(spec.get("replicas", 1))
    observed = _int(status.get("observedGeneration")) >= _int(meta.get("generation", 1))
    if kind == Kind.DEPLOYMENT:
        counts = (status.get("updatedReplicas"), status.get("replicas"), status.get("readyReplicas"),
                  status.get("availableReplicas"))
        done = observed and all(_int(c) == desired for c in counts)
    else:
        revisions = status.get("currentRevision"), status.get("updateRevision")
        done = observed and revisions[0] == revisions[1] and _int(status.get("readyReplicas")) == desired
    return Progress(done, "" if done else _trouble(status, desired))


def _trouble(status: Mapping[str, Any], desired: int) -> str:
    """The condition that names why it is stuck, else how many new pods are not ready (Pending, unschedulable)."""
    for cond in status.get("conditions") or []:
        if not isinstance(cond, Mapping):
            continue
        if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
            return f"ReplicaFailure {cond.get('reason', '')}: {str(cond.get('message', ''))[:200]}"
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return "ProgressDeadlineExceeded"
    ready = _int(status.get("readyReplicas"))
    return f"{max(0, desired - ready)} of {desired} pods not ready (Pending or unschedulable)"


def _int(raw: object) -> int:
    try:
        return int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0
