"""Node taints and pod tolerations as kube-apiserver, the scheduler and the node lifecycle controller treat them.

Upstream: Toleration.ToleratesTaint and FindMatchingUntoleratedTaint (k8s.io/api, component-helpers), the
TaintNodesByCondition admission plugin (plugin/pkg/admission/nodetaint), the node lifecycle controller's
doNoScheduleTaintingPass (condition -> NoSchedule taint) and the NoExecute taint manager's toleration time.
Pure functions on objects: no store, no clock reads (times are arguments).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

Obj = dict[str, Any]
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# nodeConditionToTaintKeyStatusMap: (condition type, status) -> the NoSchedule taint the controller keeps.
CONDITION_TAINTS = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
}
CONTROLLER_KEYS = frozenset(CONDITION_TAINTS.values()) | {UNSCHEDULABLE}


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Toleration.ToleratesTaint: an empty effect matches every effect, an empty key (with Exists) every
    key; operator Exists ignores the value, Equal (or none) needs the same value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: list[Obj], tolerations: list[Obj], effects: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE),
                ) -> Obj | None:
    """FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc: the first taint of those effects that
    no toleration tolerates (PreferNoSchedule never blocks)."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def tolerates_unschedulable(tolerations: list[Obj]) -> bool:
    """The NodeUnschedulable plugin lets a pod that tolerates `node.kubernetes.io/unschedulable:NoSchedule`
    onto a cordoned node."""
    taint = {"key": UNSCHEDULABLE, "effect": NO_SCHEDULE}
    return any(tolerates(t, taint) for t in tolerations)


def describe(taint: Obj) -> str:
    """The TaintToleration plugin's reason (v1.28): `node(s) had untolerated taint {key: value}`."""
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"


def admit_node(node: Obj) -> None:
    """TaintNodesByCondition admission: every Node is created with `node.kubernetes.io/not-ready:NoSchedule`
    (kept if sent; other taints kept as sent), so nothing lands on it before it reports Ready."""
    spec = node.setdefault("spec", {})
    taints = spec.get("taints") or []
    if not any(t.get("key") == NOT_READY and t.get("effect") == NO_SCHEDULE for t in taints):
        spec["taints"] = [*taints, {"key": NOT_READY, "effect": NO_SCHEDULE}]


def has_reported(node: Obj) -> bool:
    """Whether the node's kubelet has posted a Ready condition at all."""
    return any(c.get("type") == "Ready" for c in (node.get("status") or {}).get("conditions") or [])


def controller_taints(node: Obj) -> list[Obj]:
    """doNoScheduleTaintingPass: the NoSchedule taints the node's conditions (and spec.unschedulable) call for."""
    out = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get((cond.get("type", ""), cond.get("status", "")))
        if key:
            out.append({"key": key, "effect": NO_SCHEDULE})
    if (node.get("spec") or {}).get("unschedulable"):
        out.append({"key": UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return out


def reconcile(node: Obj, now: str) -> list[Obj] | None:
    """The node's taints after the tainting pass (SwapNodeControllerTaint: added ones get `timeAdded`),
    or None when nothing changes."""
    current = (node.get("spec") or {}).get("taints") or []
    wanted = controller_taints(node)

    def same(a: Obj, b: Obj) -> bool:
        return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")

    ours = [t for t in current if t.get("effect") == NO_SCHEDULE and t.get("key") in CONTROLLER_KEYS]
    stale = [t for t in ours if not any(same(t, w) for w in wanted)]
    added = [{**w, "timeAdded": now} for w in wanted if not any(same(w, t) for t in ours)]
    if not stale and not added:
        return None
    return [t for t in current if t not in stale] + added


def eviction_due(taints: list[Obj], tolerations: list[Obj], now: datetime) -> bool:
    """The NoExecute taint manager: a running pod goes when a NoExecute taint is not tolerated, or when the
    shortest matching `tolerationSeconds` has passed since the taint's `timeAdded`. No tolerationSeconds
    tolerates forever; a taint without timeAdded starts no clock here."""
    no_execute = [t for t in taints if t.get("effect") == NO_EXECUTE]
    if untolerated(no_execute, tolerations, (NO_EXECUTE,)) is not None:
        return True
    for taint in no_execute:
        seconds = [t["tolerationSeconds"] for t in tolerations
                   if tolerates(t, taint) and t.get("tolerationSeconds") is not None]
        added = taint.get("timeAdded")
        if seconds and added:
            since = (now - datetime.fromisoformat(added.replace("Z", "+00:00"))).total_seconds()
            if since >= max(min(seconds), 0):
                return True
    return False
