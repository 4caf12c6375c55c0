"""In-place pod resize beyond validation: its admission (LimitRanger, ResourceQuota) and the kubelet's verdict.

As kube-apiserver 1.33+ and the kubelet do it (KEP-1287, "Resource Quota" and "Affected Components"):
a pods/NAME/resize is admitted like a Pod update, so LimitRanger checks the resized containers against
the namespace's min/max and ResourceQuota charges the growth (new usage − old usage, increases only)
against every quota of the namespace whose scopes match the pod (a quota scoped to another PriorityClass
neither counts nor limits it: the admission plugin's checkRequest skips a quota its evaluator does not
`Matches`); both deny with 403 Forbidden and store nothing. The kubelet then
either applies the new resources (status.containerStatuses[*].resources) or reports why not in a
`PodResizePending` condition: `Infeasible` when the pod's requests exceed the node's allocatable
("Node didn't have enough capacity: cpu, requested: N, capacity: M", millicores), `Deferred` when they
exceed what the other pods leave free ("Node didn't have enough resource: cpu, requested: N, used: U,
capacity: M"), or allocates it and reports `PodResizeInProgress` until its runtime has actuated it (the next
sync here), when the containers' status.resources change. Reads the store; the kubelet part writes the pod's
status only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from reactor_sim import admission, quantity, quota_scopes
from reactor_sim.objects import timestamp
from reactor_sim.ownership import is_active
from reactor_sim.registry import Resource
from reactor_sim.status import forbidden

Obj = dict[str, Any]
PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
_NODE_RESOURCES = ("cpu", "memory")


def admit(store: Any, res: Resource, old: Obj, new: Obj, plurals: Iterable[tuple[str, str]]) -> None:
    """LimitRanger and ResourceQuota for a resize; ApiError 403 when either refuses."""
    admission.check_limit_ranges(store, res, new)
    _check_quota_growth(store, res, old, new, list(plurals))


def _check_quota_growth(store: Any, res: Resource, old: Obj, new: Obj, plurals: list[tuple[str, str]]) -> None:
    before, after = admission.pod_usage(old), admission.pod_usage(new)
    growth = {k: v - before.get(k, Fraction(0)) for k, v in after.items() if v > before.get(k, Fraction(0))}
    for quota in store.items("resourcequotas", new["metadata"]["namespace"]):
        if not quota_scopes.matches(quota, new):  # checkRequest: only the quotas whose evaluator Matches the pod
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        used = {k: quantity.parse(v) for k, v in admission.quota_used(store, plurals, quota).items()}
        failed = sorted(k for k in hard if k in growth and used[k] + growth[k] > quantity.parse(hard[k]))
        if failed:
            raise forbidden(res, new["metadata"]["name"], f"exceeded quota: {quota['metadata']['name']}, "
                            f"requested: {_fmt(growth, failed, hard)}, used: {_fmt(used, failed, hard)}, "
                            f"limited: {_fmt({k: quantity.parse(hard[k]) for k in failed}, failed, hard)}")


def _fmt(values: dict[str, Fraction], keys: list[str], hard: Obj) -> str:
    return ",".join(f"{k}={quantity.render(values[k], binary=quantity.is_binary(hard[k]))}" for k in keys)


def verdict(pod: Obj, node: Obj | None, pods: list[Obj]) -> tuple[str, str] | None:
    """(reason, message) when the kubelet cannot apply the pod's spec now; None when it can."""
    if node is None:
        return None
    alloc = (node.get("status") or {}).get("allocatable") or (node.get("status") or {}).get("capacity") or {}
    wanted = _requests(pod)
    for key in _NODE_RESOURCES:
        if key not in alloc:
            continue
        capacity, need = _units(key, quantity.parse(alloc[key])), _units(key, wanted.get(key, Fraction(0)))
        if need > capacity:
            return "Infeasible", f"Node didn't have enough capacity: {key}, requested: {need}, capacity: {capacity}"
        used = sum(_units(key, _requests(p).get(key, Fraction(0))) for p in _others(pod, node, pods))
        if used + need > capacity:
            return "Deferred", (f"Node didn't have enough resource: {key}, requested: {need}, used: {used}, "
                                f"capacity: {capacity}")
    return None


def _units(key: str, value: Fraction) -> int:
    """What the kubelet prints: CPU in millicores, memory in bytes (rounded up)."""
    scaled = value * 1000 if key == "cpu" else value
    return int(-(-scaled.numerator // scaled.denominator))


def _requests(pod: Obj) -> dict[str, Fraction]:
    usage = admission.pod_usage(pod)
    return {k: usage.get(f"requests.{k}", Fraction(0)) for k in _NODE_RESOURCES}


def _others(pod: Obj, node: Obj, pods: list[Obj]) -> list[Obj]:
    name, uid = node["metadata"]["name"], pod["metadata"]["uid"]
    return [p for p in pods if p["metadata"]["uid"] != uid and p["spec"].get("nodeName") == name and is_active(p)]


def reported(pod: Obj) -> bool:
    """Does the pod carry a resize verdict (to be re-examined, actuated, and dropped once applied): a condition,
    or before 1.33 `status.resize`?"""
    status = pod.get("status") or {}
    return bool(status.get("resize")) or any(c.get("type") in (PENDING, IN_PROGRESS)
                                             for c in status.get("conditions") or [])


def mark_proposed(old: Obj, new: Obj) -> None:
    """MarkPodProposedForResize (pkg/api/pod/util.go, v1.27–v1.32): a resize that changes a container's resources
    sets `status.resize: Proposed` for the kubelet to answer."""
    before = {c.get("name"): c.get("resources") for c in (old.get("spec") or {}).get("containers") or []}
    if any(before.get(c.get("name")) != c.get("resources") for c in (new.get("spec") or {}).get("containers") or []):
        new.setdefault("status", {})["resize"] = "Proposed"


def actuate_legacy(api: Any, pod: Obj, node: Obj | None, pods: list[Obj]) -> None:
    """The v1.27–v1.32 kubelet (gate on): its verdict in `status.resize`, one step per sync like `actuate`:
    `Deferred` or `Infeasible` while it does not fit, else `InProgress`, then applied (containerStatuses[].resources
    become the spec's) and `status.resize` cleared."""
    status = pod["status"]
    specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
    running = [s for s in status.get("containerStatuses") or [] if "running" in (s.get("state") or {})]
    differs = any(s.get("resources") != specs.get(s.get("name"), {}).get("resources") for s in running)
    before = status.get("resize")
    refused = verdict(pod, node, pods) if differs else None
    if not differs:
        status.pop("resize", None)
    elif refused is not None:
        status["resize"] = refused[0]
    elif before != "InProgress":
        status["resize"] = "InProgress"
    else:
        for s in running:
            if s.get("name") in specs:
                s["resources"] = copy.deepcopy(specs[s["name"]].get("resources") or {})
        status.pop("resize", None)
    if status.get("resize") != before or (differs and refused is None and before == "InProgress"):
        api.store.put("pods", pod)


def actuate(api: Any, pod: Obj, node: Obj | None, pods: list[Obj]) -> None:
    """The kubelet's part, one step per sync as its allocation manager and syncPod take it.

    A resize not yet allocated is either refused (`PodResizePending` Deferred/Infeasible, re-examined every
    sync) or allocated: `PodResizePending` cleared and `PodResizeInProgress` set (status True, no reason or
    message: `SetPodResizeInProgressCondition(uid, "", "", generation)`), the containers still reporting their
    old resources. On the next sync the runtime has actuated it: `containerStatuses[*].resources` become the
    spec's and `PodResizeInProgress` is cleared (allocated == actual). Only the requests decide whether a
    resize fits, so a spec changed again while one is in progress is examined with its new requests.
    """
    status = pod["status"]
    old = list(status.get("conditions") or [])
    specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
    running = [s for s in status.get("containerStatuses") or [] if "running" in (s.get("state") or {})]
    differs = any(s.get("resources") != specs.get(s.get("name"), {}).get("resources") for s in running)
    in_progress = _condition(old, IN_PROGRESS)
    conditions = [c for c in old if c.get("type") not in (PENDING, IN_PROGRESS)]
    refused = verdict(pod, node, pods) if differs else None
    if differs and refused is not None:
        # Deferred/Infeasible; an earlier resize still being actuated keeps its InProgress beside it.
        conditions += [c for c in (in_progress,) if c is not None]
        conditions.append(_resize_condition(api, old, PENDING, *refused))
    elif differs and in_progress is None:
        conditions.append(_resize_condition(api, old, IN_PROGRESS, "", ""))
    elif differs:
        for s in running:
            if s.get("name") in specs:
                s["resources"] = copy.deepcopy(specs[s["name"]].get("resources") or {})
    if conditions != old or (differs and refused is None and in_progress is not None):
        status["conditions"] = conditions
        api.store.put("pods", pod)


def _condition(conditions: list[Obj], kind: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _resize_condition(api: Any, old: list[Obj], kind: str, reason: str, message: str) -> Obj:
    """The condition as the status manager writes it; an unchanged one is kept as it was (its times too)."""
    current = _condition(old, kind)
    if current is not None and (current.get("reason", ""), current.get("message", "")) == (reason, message):
        return current
    now = timestamp(api.clock)
    condition: Obj = {"type": kind, "status": "True"}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return {**condition, "lastProbeTime": now, "lastTransitionTime": now}
