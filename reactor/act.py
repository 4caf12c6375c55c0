"""The only place that changes the cluster: one conditional patch per action, then an Event.

The change and the reactor's state annotations travel in the same strategic-merge patch,
conditional on the resourceVersion that was read, so a change is never half-written and a
stale read is a clean 409. Pod GPU resources and `priorityClassName` are immutable on running
pods, so the patch always targets the owner's pod template.
"""

from __future__ import annotations

import logging
import socket
from datetime import datetime
from typing import Any

from .errors import ReactorError
from .kube import KubeGateway
from .model import Action, Workload
from .workloads import template_path

log = logging.getLogger(__name__)

API_VERSIONS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "CronJob": "batch/v1", "Job": "batch/v1"}
EVENT_REASONS = {
    "resize-gpu": "GPUResized",
    "scale-replicas": "ReplicasScaled",
    "set-priority": "PriorityChanged",
    "revert": "ChangeReverted",
}


def changed_field(action: Action, workload: Workload) -> str:
    """Which field an action sets; a revert undoes whatever the last action changed."""
    if action.action != "revert":
        return action.action
    last = workload.state.last_action
    return last.action if last is not None else "revert"


def build_patch(action: Action, workload: Workload, annotations: dict[str, str | None], gpu_resource: str) -> dict[str, Any]:
    """The strategic-merge patch that sets the desired state and records it, conditional on the read."""
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": workload.resource_version, "annotations": annotations},
    }
    field = changed_field(action, workload)
    if field == "scale-replicas":
        patch["spec"] = {"replicas": int(action.to_value)}  # type: ignore[arg-type]
        return patch
    pod_spec: dict[str, Any]
    if field == "resize-gpu":
        count = str(action.to_value)
        # Request and limit together: an extended resource's request must equal its limit.
        resources = {"limits": {gpu_resource: count}, "requests": {gpu_resource: count}}
        pod_spec = {"containers": [{"name": action.container, "resources": resources}]}
    elif field == "set-priority":
        pod_spec = {"priorityClassName": action.to_value}
    else:
        raise ReactorError(f"cannot build a patch for action {action.action!r} on {workload.ref}")
    node: dict[str, Any] = patch
    path = template_path(workload.ref.kind)
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = pod_spec
    return patch


def apply(kube: KubeGateway, action: Action, workload: Workload, annotations: dict[str, str | None], gpu_resource: str) -> dict[str, Any]:
    """Send the patch; raises ConflictError on a stale read. Returns the object as written."""
    ref = workload.ref
    return kube.patch(ref.kind, ref.namespace, ref.name, build_patch(action, workload, annotations, gpu_resource))


def record_event(kube: KubeGateway, action: Action, written: dict[str, Any], message: str, now: datetime) -> bool:
    """A Normal Event on the workload for `kubectl describe`; failing to write one never undoes the action."""
    meta = written.get("metadata") or {}
    ref = action.workload
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
        "involvedObject": {
            "apiVersion": API_VERSIONS.get(ref.kind, "v1"),
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": EVENT_REASONS.get(action.action, "GPUReactorAction"),
        "message": message[:1024],
        "type": "Normal",
        "source": {"component": "gpu-reactor"},
        "reportingComponent": "gpu-reactor",
        "reportingInstance": socket.gethostname()[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        kube.create_event(ref.namespace, body)
    except ReactorError as e:
        log.warning("event not recorded", extra={"workload": str(ref), "error": str(e)})
        return False
    return True
