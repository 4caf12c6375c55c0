"""What every operator's status says of its rollout, read the same way by several adapters: the generation the
operator observed, a Ready condition, and the rollout of the Deployment or StatefulSet it runs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]

TEMPLATE_FIELDS = ("resize-gpu", "set-priority", "resize-cpu", "resize-memory")


def positive(raw: Any, default: int = 1) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else default


def child_rollout(child: Obj | None) -> str:
    """Why the Deployment or StatefulSet an operator runs is still rolling out ("" when it is not)."""
    if child is None:
        return ""
    meta, spec, status = child.get("metadata") or {}, child.get("spec") or {}, child.get("status") or {}
    generation, observed = int(meta.get("generation", 0)), int(status.get("observedGeneration", 0))
    if observed < generation:
        return f"{child.get('kind')} {meta.get('name')}: generation {generation} observed {observed}"
    replicas, updated = int(spec.get("replicas", 1)), int(status.get("updatedReplicas", 0))
    if updated < replicas:
        return f"{child.get('kind')} {meta.get('name')}: {updated} of {replicas} replicas updated"
    revision = status.get("updateRevision")
    if revision and status.get("currentRevision") not in (None, revision):
        return f"{child.get('kind')} {meta.get('name')}: revision {revision} not yet current"
    return ""


def observed_behind(obj: Obj) -> str:
    generation = int((obj.get("metadata") or {}).get("generation", 0))
    observed = (obj.get("status") or {}).get("observedGeneration")
    if isinstance(observed, int) and observed < generation:
        return f"the operator observed generation {observed} of {generation}"
    return ""


def not_ready(obj: Obj) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready" and condition.get("status") != "True":
            return f"Ready is {condition.get('status')}: {condition.get('reason', '')} {condition.get('message', '')}"
    return ""

