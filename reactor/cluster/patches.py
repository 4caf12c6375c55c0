"""The patch that carries a decided change and the reactor's record together, as the workload's kind takes it: a
strategic merge of the pod template for a built-in controller's kind (here), a JSON merge patch of the part for an
operator's resource (adapted.py). Kueue's priority is a label on any kind (act/actor.py asks that first).

Pure: the patch is built from the decision and the object as read; the act step sends it, conditional on the
resourceVersion it carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.cluster.compute import CPU_ACTION, MEMORY_ACTION, template_compute
from reactor.cluster.workloads import template_path
from reactor.core.errors import ReactorError
from reactor.core.model import Action, Workload


def effective_action(action: Action, workload: Workload) -> str:
    """Which field an action sets; a revert undoes whatever the last action changed."""
    if action.action != "revert":
        return action.action
    last = workload.state.last_action
    return last.action if last is not None else "revert"


def template_patch(action: Action, workload: Workload, annotations: Mapping[str, str | None],
                   gpu_resource: str, cpu_apply_to: str = "pods") -> dict[str, Any]:
    """The strategic-merge patch that sets the desired state and records it, conditional on the read."""
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": workload.resource_version, "annotations": dict(annotations)},
    }
    field = effective_action(action, workload)
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
    elif field in (CPU_ACTION, MEMORY_ACTION):
        if cpu_apply_to == "pods":
            return patch  # the pods are resized in place; the owner records it
        pod_spec = template_compute(action)
    else:
        raise ReactorError(f"cannot build a patch for action {action.action!r} on {workload.ref}")
    node: dict[str, Any] = patch
    path = template_path(workload.ref.kind)
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = pod_spec
    return patch
