"""Pure conversions for the CPU half: a container's CPU, the namespace's CPU bounds, a pod's resize status.

Reads raw Kubernetes objects (JSON dicts) into the model's values and builds the pods/resize body;
does no I/O. Every value comes from objects tenants can write, so anything unparseable reads as
"not set", never as a number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from . import workloads
from .model import CpuBounds, CpuQuota, CpuResources
from .rollout import Progress

# The pod conditions an in-place resize reports (Kubernetes 1.33+), as the kubelet sets them.
RESIZE_PENDING = "PodResizePending"  # reason Deferred (may fit later) or Infeasible (never on this node)
RESIZE_IN_PROGRESS = "PodResizeInProgress"
# The ResourceQuota lines a CPU raise counts against: `cpu` is requests.cpu's older spelling, tracked apart.
CPU_QUOTA_KEYS = ("cpu", "requests.cpu", "limits.cpu")


def millicores(raw: Any) -> int | None:
    """A CPU quantity in millicores, rounded up like the API server's MilliValue; None if unparseable."""
    try:
        value = workloads.parse_quantity(raw) * 1000
    except (ValueError, ArithmeticError):
        return None
    if value < 0:
        return None
    return int(value) if value == int(value) else int(value) + 1


def container_cpu(resources: Mapping[str, Any] | None) -> CpuResources | None:
    """The CPU request and limit of one container's `resources`; None when neither is set."""
    resources = resources or {}
    request = (resources.get("requests") or {}).get("cpu")
    limit = (resources.get("limits") or {}).get("cpu")
    if request is None and limit is None:
        return None
    return CpuResources(request_m=None if request is None else millicores(request),
                        limit_m=None if limit is None else millicores(limit))


def pod_cpu(pod: Mapping[str, Any] | None) -> Mapping[str, CpuResources]:
    """Container name → CPU, as the pod's spec holds it now (a resize writes the spec)."""
    found: dict[str, CpuResources] = {}
    for c in ((pod or {}).get("spec") or {}).get("containers") or []:
        cpu = container_cpu(c.get("resources")) if isinstance(c, dict) else None
        if cpu is not None and isinstance(c.get("name"), str):
            found[c["name"]] = cpu
    return MappingProxyType(found)


def to_cpu_bounds(limit_ranges: Iterable[Mapping[str, Any]], quotas: Iterable[Mapping[str, Any]]) -> CpuBounds:
    """The tightest Container min/max for cpu, and every quota's CPU lines with its scope."""
    lo: int | None = None
    hi: int | None = None
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            low, high = millicores((item.get("min") or {}).get("cpu")), millicores((item.get("max") or {}).get("cpu"))
            lo = low if lo is None or (low is not None and low > lo) else lo
            hi = high if hi is None or (high is not None and high < hi) else hi
    lines = sorted((line for quota in quotas for line in cpu_quota_lines(quota)), key=lambda q: q.key)
    return CpuBounds(min_m=lo, max_m=hi, quotas=tuple(lines))


def cpu_quota_lines(quota: Mapping[str, Any]) -> list[CpuQuota]:
    """The quota's `cpu`, `requests.cpu` and `limits.cpu` lines (hard from status, as the API server enforces
    it, else spec). A hard value that does not parse is skipped: it is not a bound the reactor can reason on."""
    status, spec = quota.get("status") or {}, quota.get("spec") or {}
    name = str((quota.get("metadata") or {}).get("name", ""))
    found = []
    for key in CPU_QUOTA_KEYS:
        hard = millicores((status.get("hard") or {}).get(key, (spec.get("hard") or {}).get(key)))
        if hard is None:
            continue
        used = millicores((status.get("used") or {}).get(key, 0)) or 0
        found.append(CpuQuota(name=name, resource=key, hard_m=hard, used_m=used,
                              scopes=workloads.scope_terms(dict(spec))))
    return found


def cpu_quantity(millis: int) -> str:
    """The canonical spelling the API server gives back: whole cores as `3`, else `2500m`."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def resize_body(container: str, cpu: CpuResources) -> dict[str, Any]:
    """The strategic-merge body for pods/NAME/resize: one container's CPU request and limit."""
    assert cpu.limit_m is not None
    resources: dict[str, Any] = {"limits": {"cpu": cpu_quantity(cpu.limit_m)}}
    if cpu.request_m is not None:
        resources["requests"] = {"cpu": cpu_quantity(cpu.request_m)}
    return {"spec": {"containers": [{"name": container, "resources": resources}]}}


def resize_status(pod: Mapping[str, Any]) -> str:
    """What the kubelet says of a resize: "Deferred: …", "Infeasible: …", "InProgress" (allocated, being
    actuated; "InProgress: Error: …" when actuating failed and is retried), "Proposed" (not looked at yet: the
    running containers still report other CPU than the spec asks) or "done".

    Only "done" is done. A pending verdict wins over InProgress: both set means the newest resize (the
    reactor's) waits while an earlier one is still being actuated.
    """
    status = pod.get("status") or {}
    true = {c.get("type"): c for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("status") == "True"}
    pending, in_progress = true.get(RESIZE_PENDING), true.get(RESIZE_IN_PROGRESS)
    if pending is not None:
        return f"{pending.get('reason') or 'Pending'}: {pending.get('message') or ''}".strip()
    if in_progress is not None:
        why = f"{in_progress.get('reason') or ''}: {in_progress.get('message') or ''}".strip(": ")
        return f"InProgress: {why}" if why else "InProgress"
    applied = {c.get("name"): container_cpu(c.get("resources")) for c in status.get("containerStatuses") or []
               if isinstance(c, dict) and c.get("resources") is not None}
    wanted = pod_cpu(pod)
    if any(name in applied and applied[name] != cpu for name, cpu in wanted.items()):
        return "Proposed"
    return "done"


def resize_progress(pods: Iterable[Mapping[str, Any]], selector: Mapping[str, Any] | None, container: str,
                    limit_m: int) -> Progress:
    """How far an in-place CPU raise has got: on the live pods (of `selector`'s labels, when the owner has
    one) whose spec asks `limit_m` for `container`, which the reactor resized. Done only when the kubelet
    reports every one applied; `actuating` while one is InProgress (allocated, being actuated); otherwise the
    trouble names the pods still Proposed, Deferred or Infeasible. No such pod left (replaced since): done.
    """
    waiting: dict[str, str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            continue
        cpu = pod_cpu(pod).get(container)
        if cpu is None or cpu.limit_m != limit_m:
            continue
        state = resize_status(pod)
        if state != "done":
            waiting[str(meta.get("name", ""))] = state
    if not waiting:
        return Progress(True)
    named = "; ".join(f"{name}: {state}" for name, state in sorted(waiting.items())[:3])
    more = f" (+{len(waiting) - 3} more)" if len(waiting) > 3 else ""
    actuating = any(state.startswith("InProgress") for state in waiting.values())
    return Progress(False, f"in-place resize not applied on {len(waiting)} pods: {named}{more}"[:300],
                    actuating=actuating, pods=tuple(sorted(waiting)))
