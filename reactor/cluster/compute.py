"""Pure conversions for the CPU half (and its memory action): a container's CPU or memory, the namespace's
bounds for either, a pod's resize status.

Reads raw Kubernetes objects (JSON dicts) into the model's values and builds the pods/resize body;
does no I/O. Every value comes from objects tenants can write, so anything unparseable reads as
"not set", never as a number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from reactor.cluster.rollout import Progress
from reactor.core import quantity as quantities
from reactor.core.model import Action, ComputeBounds, ComputeQuota, ComputeResources, ScopeTerm

CPU_ACTION = "resize-cpu"
MEMORY_ACTION = "resize-memory"

# The pod conditions an in-place resize reports (Kubernetes 1.33+), as the kubelet sets them.
RESIZE_PENDING = "PodResizePending"  # reason Deferred (may fit later) or Infeasible (never on this node)
RESIZE_IN_PROGRESS = "PodResizeInProgress"
# Before 1.33 (the alpha gate on) the kubelet's verdict was `status.resize`, one of these (KEP-1287 v1.27 API);
# 1.33 replaced it with the conditions above.
LEGACY_RESIZE = ("Proposed", "InProgress", "Deferred", "Infeasible")
# The ResourceQuota lines a CPU (memory) raise counts against: `cpu` (`memory`) is the requests line's older
# spelling, tracked apart. A new pod also counts 1 on `pods` and on `count/pods` (pods.go PodUsageFunc).
QUOTA_KEYS = {"cpu": ("cpu", "requests.cpu", "limits.cpu"), "memory": ("memory", "requests.memory", "limits.memory"),
              "pods": ("pods", "count/pods")}
CPU_QUOTA_KEYS = QUOTA_KEYS["cpu"]
RESOURCES = ("cpu", "memory")  # the compute resources a container sets (and a pod resize changes)
# A container's resizePolicy for a resource: NotRequired (the default) resizes it in place, RestartContainer
# restarts the container to apply it.
RESTART_CONTAINER = "RestartContainer"


def millicores(raw: Any) -> int | None:
    """A CPU quantity in millicores (the API server's MilliValue: rounded up); None if unparseable or negative."""
    return _non_negative(quantities.milli_value, raw)


def amount(raw: Any, resource: str = "cpu") -> int | None:
    """A quantity in the resource's integer unit: millicores for CPU, bytes for memory (the API server's
    MilliValue and Value: rounded up); None if unparseable or negative."""
    return _non_negative(quantities.milli_value if resource == "cpu" else quantities.value, raw)


def _non_negative(parse: Callable[[Any], int], raw: Any) -> int | None:
    try:
        value = parse(raw)
    except ValueError:
        return None
    return None if value < 0 else value


def container_compute(resources: Mapping[str, Any] | None, resource: str = "cpu") -> ComputeResources | None:
    """The request and limit of `resource` (cpu or memory) in one container's `resources`; None when neither
    is set."""
    resources = resources or {}
    request = (resources.get("requests") or {}).get(resource)
    limit = (resources.get("limits") or {}).get(resource)
    if request is None and limit is None:
        return None
    return ComputeResources(request=None if request is None else amount(request, resource),
                            limit=None if limit is None else amount(limit, resource))


def pod_compute(pod: Mapping[str, Any] | None, resource: str = "cpu") -> Mapping[str, ComputeResources]:
    """Container name → its CPU (or memory), as the pod's spec holds it now (a resize writes the spec)."""
    found: dict[str, ComputeResources] = {}
    for c in ((pod or {}).get("spec") or {}).get("containers") or []:
        cpu = container_compute(c.get("resources"), resource) if isinstance(c, dict) else None
        if cpu is not None and isinstance(c.get("name"), str):
            found[c["name"]] = cpu
    return MappingProxyType(found)


def restarts_on_resize(pod: Mapping[str, Any] | None, resource: str) -> frozenset[str]:
    """The pod's containers whose resizePolicy restarts them to resize `resource` (RestartContainer); the
    others (NotRequired, the default when unset) are resized in place while they run."""
    found = set()
    for c in ((pod or {}).get("spec") or {}).get("containers") or []:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            continue
        for rule in c.get("resizePolicy") or []:
            if isinstance(rule, dict) and rule.get("resourceName") == resource \
                    and rule.get("restartPolicy") == RESTART_CONTAINER:
                found.add(c["name"])
    return frozenset(found)


def to_compute_bounds(limit_ranges: Iterable[Mapping[str, Any]], quotas: Iterable[Mapping[str, Any]],
                  resource: str = "cpu") -> ComputeBounds:
    """The tightest Container min/max/maxLimitRequestRatio for `resource` (cpu or memory), the same of the Pod
    items (against the pod's sums), and every quota's lines for it with its scope."""
    items = [item for lr in limit_ranges for item in (lr.get("spec") or {}).get("limits") or []]
    lo, hi, ratio = _tightest(items, resource, "Container")
    pod_lo, pod_hi, pod_ratio = _tightest(items, resource, "Pod")
    lines = sorted((line for quota in quotas for line in compute_quota_lines(quota, resource)), key=lambda q: q.key)
    request, limit = (_default(limit_ranges, section, resource) for section in ("defaultRequest", "default"))
    return ComputeBounds(lowest=lo, highest=hi, max_ratio=ratio, pod_lowest=pod_lo, pod_highest=pod_hi,
                         pod_max_ratio=pod_ratio, quotas=tuple(lines), default_request=request, default_limit=limit)


def _default(limit_ranges: Iterable[Mapping[str, Any]], section: str, resource: str) -> int | None:
    """The value LimitRanger fills into a container that lacks it (plugin/pkg/admission/limitranger/admission.go):
    each LimitRange in turn merges its defaults into the pod (defaultContainerResourceRequirements: the last Container
    item of that LimitRange naming the resource), so the first LimitRange that has one sets it."""
    for lr in limit_ranges:
        found = None
        for item in (lr.get("spec") or {}).get("limits") or []:
            raw = (item.get(section) or {}).get(resource) if item.get("type") == "Container" else None
            found = found if raw is None else amount(raw, resource)
        if found is not None:
            return found
    return None


def _tightest(items: list[Mapping[str, Any]], resource: str,
              kind: str) -> tuple[int | None, int | None, float | None]:
    lo: int | None = None
    hi: int | None = None
    ratio: float | None = None
    for item in items:
        if item.get("type") != kind:
            continue
        low = amount((item.get("min") or {}).get(resource), resource)
        high = amount((item.get("max") or {}).get(resource), resource)
        most = _ratio((item.get("maxLimitRequestRatio") or {}).get(resource))
        lo = low if lo is None or (low is not None and low > lo) else lo
        hi = high if hi is None or (high is not None and high < hi) else hi
        ratio = most if ratio is None or (most is not None and most < ratio) else ratio
    return lo, hi, ratio


def _ratio(raw: Any) -> float | None:
    if raw is None:
        return None
    try:
        value = quantities.parse_quantity(raw)
    except ValueError:
        return None
    return float(value) if value > 0 else None


def compute_quota_lines(quota: Mapping[str, Any], resource: str = "cpu") -> list[ComputeQuota]:
    """The quota's `cpu`, `requests.cpu` and `limits.cpu` lines (or memory's: `memory`, `requests.memory`,
    `limits.memory`; or its pod count's with `resource` "pods": `pods`, `count/pods`; hard from status, as the API
    server enforces it, else spec). A hard value that does not parse is skipped: it is not a bound the reactor can
    reason on."""
    status, spec = quota.get("status") or {}, quota.get("spec") or {}
    name = str((quota.get("metadata") or {}).get("name", ""))
    found = []
    for key in QUOTA_KEYS[resource]:
        hard = amount((status.get("hard") or {}).get(key, (spec.get("hard") or {}).get(key)), resource)
        if hard is None:
            continue
        used = amount((status.get("used") or {}).get(key, 0), resource) or 0
        found.append(ComputeQuota(name=name, resource=key, hard=hard, used=used,
                                  scopes=scope_terms(dict(spec))))
    return found


def cpu_quantity(millis: int) -> str:
    """The canonical spelling the API server gives back: whole cores as `3`, else `2500m`."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def memory_quantity(size: int) -> str:
    """Bytes in the largest binary suffix that divides them (`8Gi`, `1536Mi`), else plain bytes."""
    for suffix, unit in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def quantity(value: int, resource: str = "cpu") -> str:
    """A CPU (millicores) or memory (bytes) amount as a Kubernetes quantity."""
    return cpu_quantity(value) if resource == "cpu" else memory_quantity(value)


def resize_body(container: str, cpu: ComputeResources, resource: str = "cpu") -> dict[str, Any]:
    """The strategic-merge body for pods/NAME/resize: one container's request and limit of `resource`."""
    assert cpu.limit is not None
    resources: dict[str, Any] = {"limits": {resource: quantity(cpu.limit, resource)}}
    if cpu.request is not None:
        resources["requests"] = {resource: quantity(cpu.request, resource)}
    return {"spec": {"containers": [{"name": container, "resources": resources}]}}


def carries(pod: Mapping[str, Any], container: str, value: ComputeResources, resource: str = "cpu") -> bool:
    """Does the pod's spec (as a resize answered it) ask `value` of `resource` for `container`? A limit-only
    value is carried when the limit is (the server defaults the request)."""
    found = pod_compute(pod, resource).get(container)
    if found is None or found.limit != value.limit:
        return False
    return value.request is None or found.request == value.request


def resize_status(pod: Mapping[str, Any]) -> str:
    """What the kubelet says of a resize: "Deferred: …", "Infeasible: …", "InProgress" (allocated, being
    actuated; "InProgress: Error: …" when actuating failed and is retried), "Proposed" (not looked at yet: the
    running containers still report other CPU or memory than the spec asks) or "done".

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
    legacy = status.get("resize")  # v1.27–v1.32 with InPlacePodVerticalScaling on: Proposed, InProgress, ...
    if isinstance(legacy, str) and legacy in LEGACY_RESIZE:
        return legacy
    reported = [c for c in status.get("containerStatuses") or []
                if isinstance(c, dict) and c.get("resources") is not None]
    for resource in RESOURCES:
        applied = {c.get("name"): container_compute(c.get("resources"), resource) for c in reported}
        wanted = pod_compute(pod, resource)
        if any(name in applied and applied[name] != cpu for name, cpu in wanted.items()):
            return "Proposed"
    return "done"


def resize_progress(pods: Iterable[Mapping[str, Any]], selector: Mapping[str, Any] | None, container: str,
                    limit_m: int, resource: str = "cpu") -> Progress:
    """How far an in-place CPU (or memory) raise has got: on the live pods (of `selector`'s labels, when the
    owner has one) whose spec asks `limit_m` (millicores; bytes for memory) of `resource` for `container`, which
    the reactor resized. Done only when the kubelet reports every one applied; `actuating` while one is
    InProgress (allocated, being actuated); otherwise the trouble names the pods still Proposed, Deferred or
    Infeasible. No such pod left (replaced since): done.
    """
    waiting: dict[str, str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            continue
        cpu = pod_compute(pod, resource).get(container)
        if cpu is None or cpu.limit != limit_m:
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


def scope_terms(spec: Mapping[str, Any]) -> tuple[ScopeTerm, ...]:
    """A quota's scope as terms: each `spec.scopes` entry as `Exists`, then the scopeSelector's expressions."""
    terms = [ScopeTerm(str(s)) for s in spec.get("scopes") or []]
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        terms.append(ScopeTerm(str(expr.get("scopeName", "")), str(expr.get("operator", "")),
                               tuple(str(v) for v in expr.get("values") or [])))
    return tuple(terms)


def compute_of(action: Action) -> tuple[str, ComputeResources]:
    """(resource, what to set) of a CPU or memory action (a revert carries what it restores)."""
    if action.memory is not None:
        return "memory", action.memory
    assert action.cpu is not None
    return "cpu", action.cpu


def template_compute(action: Action) -> dict[str, Any]:
    """The pod-spec part of a template patch that sets the container's CPU (or memory)."""
    assert action.container is not None
    resource, value = compute_of(action)
    return resize_body(action.container, value, resource)["spec"]
