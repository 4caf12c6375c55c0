"""Admission plugins applied when a Pod is created: LimitRanger, Priority, ResourceQuota.

Also the object defaulting that belongs with them (LimitRange items) and the quota usage the
resource-quota controller maintains. Reads the store, never writes it; denials are ApiError 403s.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from reactor_sim import quantity, quota_scopes
from reactor_sim.quota_usage import QuotaUsage
from reactor_sim.registry import Resource
from reactor_sim.status import ApiError, forbidden
from reactor_sim.store import Store
from reactor_sim.validation import CONTAINER_LISTS

Obj = dict[str, Any]
COMPUTE = ("cpu", "memory")


def default_limit_range(lr: Obj) -> None:
    """SetDefaults_LimitRangeItem: default <- max, defaultRequest <- default, then <- min (Container)."""
    for item in (lr.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        request = item.setdefault("defaultRequest", {})
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            request.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            request.setdefault(key, value)
        for name in ("default", "defaultRequest"):
            if not item[name]:
                del item[name]


def _items(store: Store, namespace: str, kind: str) -> list[Obj]:
    return [item for lr in store.items("limitranges", namespace)
            for item in (lr.get("spec") or {}).get("limits") or [] if item.get("type") == kind]


def _container_items(store: Store, namespace: str) -> list[Obj]:
    return _items(store, namespace, "Container")


def apply_limit_ranges(store: Store, pod: Obj) -> None:
    """LimitRanger mutation: fill missing container limits/requests from each Container item."""
    for item in _container_items(store, pod["metadata"]["namespace"]):
        for lst in CONTAINER_LISTS:
            for c in pod["spec"].get(lst) or []:
                res = c.setdefault("resources", {})
                for key, value in (item.get("default") or {}).items():
                    res.setdefault("limits", {}).setdefault(key, value)
                for key, value in (item.get("defaultRequest") or {}).items():
                    res.setdefault("requests", {}).setdefault(key, value)


def check_limit_ranges(store: Store, res: Resource, pod: Obj) -> None:
    """LimitRanger validation (plugin/pkg/admission/limitranger/admission.go, PodValidateLimitFunc): each
    Container item against every container and init container, each Pod item against the pod's requests and
    limits as `podRequests` / `podLimits` sum them; min, max and maxLimitRequestRatio each."""
    namespace = pod["metadata"]["namespace"]
    errors: list[str] = []
    for item in _container_items(store, namespace):
        for lst in CONTAINER_LISTS:
            for c in pod["spec"].get(lst) or []:
                resources = c.get("resources") or {}
                errors += _check_item(item, "Container", resources.get("requests") or {},
                                      resources.get("limits") or {})
    for item in _items(store, namespace, "Pod"):
        errors += _check_item(item, "Pod", pod_resources(pod, "requests"), pod_resources(pod, "limits"))
    if errors:
        why = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise forbidden(res, pod["metadata"]["name"], why)


def pod_resources(pod: Obj, section: str) -> dict[str, Fraction]:
    """`podRequests` / `podLimits` of admission.go: the containers' sum, sidecars (init containers with
    restartPolicy Always) added to it, and at least each other init container plus the sidecars started before
    it. A resource no container sets is absent, not 0 (maxConstraint then says "No limit is specified")."""
    total: dict[str, Fraction] = {}
    for c in pod["spec"].get("containers") or []:
        _add(total, _section(c, section))
    sidecars: dict[str, Fraction] = {}
    inits: dict[str, Fraction] = {}
    for c in pod["spec"].get("initContainers") or []:
        own = _section(c, section)
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            own = dict(sidecars)
        else:
            own = {**own}
            _add(own, sidecars)
        for key, value in own.items():
            inits[key] = max(inits.get(key, value), value)
    for key, value in inits.items():
        total[key] = max(total.get(key, value), value)
    return total


def _section(container: Obj, section: str) -> dict[str, Fraction]:
    return {k: quantity.parse(v) for k, v in ((container.get("resources") or {}).get(section) or {}).items()}


def _add(total: dict[str, Fraction], more: dict[str, Fraction]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, Fraction(0)) + value


def _check_item(item: Obj, kind: str, requests: Obj, limits: Obj) -> list[str]:
    """minConstraint, maxConstraint and limitRequestRatioConstraint of admission.go for one item."""
    errors: list[str] = []
    for key, raw in (item.get("min") or {}).items():
        error = _min(kind, key, raw, requests, limits)
        errors += [error] if error else []
    for key, raw in (item.get("max") or {}).items():
        error = _max(kind, key, raw, requests, limits)
        errors += [error] if error else []
    for key, raw in (item.get("maxLimitRequestRatio") or {}).items():
        errors += _check_ratio(kind, key, raw, requests, limits)
    return errors


def _value(raw: Any) -> Fraction:
    return raw if isinstance(raw, Fraction) else quantity.parse(raw)


def _min(kind: str, key: str, raw: Any, requests: Obj, limits: Obj) -> str | None:
    enforced = quantity.parse(raw)
    if key not in requests:
        return f"minimum {key} usage per {kind} is {raw}.  No request is specified"
    if _value(requests[key]) < enforced:
        return f"minimum {key} usage per {kind} is {raw}, but request is {_text(requests[key], raw)}"
    if key in limits and _value(limits[key]) < enforced:
        return f"minimum {key} usage per {kind} is {raw}, but limit is {_text(limits[key], raw)}"
    return None


def _max(kind: str, key: str, raw: Any, requests: Obj, limits: Obj) -> str | None:
    enforced = quantity.parse(raw)
    if key not in limits:
        return f"maximum {key} usage per {kind} is {raw}.  No limit is specified"
    if _value(limits[key]) > enforced:
        return f"maximum {key} usage per {kind} is {raw}, but limit is {_text(limits[key], raw)}"
    if key in requests and _value(requests[key]) > enforced:
        return f"maximum {key} usage per {kind} is {raw}, but request is {_text(requests[key], raw)}"
    return None


def _text(value: Any, enforced: Any) -> str:
    """A container's quantity as written; a pod's sum (a Fraction) as Quantity.String() prints it."""
    if isinstance(value, Fraction):
        return quantity.render(value, binary=quantity.is_binary(enforced))
    return str(value)


def _check_ratio(kind: str, key: str, raw: Any, requests: Obj, limits: Obj) -> list[str]:
    """limitRequestRatioConstraint: limit / request at most the ratio (compared in milli-units, as upstream
    does for a ratio that fits them), both set and non-zero."""
    request = _value(requests[key]) if key in requests else Fraction(0)
    limit = _value(limits[key]) if key in limits else Fraction(0)
    if request == 0:
        return [f"{key} max limit to request ratio per {kind} is {raw}, but no request is specified or "
                "request is 0"]
    if limit == 0:
        return [f"{key} max limit to request ratio per {kind} is {raw}, but no limit is specified or limit is 0"]
    if limit / request > quantity.parse(raw):
        return [f"{key} max limit to request ratio per {kind} is {raw}, but provided ratio is "
                f"{float(limit / request):f}"]
    return []


def apply_priority(store: Store, res: Resource, pod: Obj) -> None:
    """Priority admission: resolve priorityClassName (or the global default) into spec.priority."""
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    classes = list(store.items("priorityclasses"))
    if name:
        pc = next((c for c in classes if c["metadata"]["name"] == name), None)
        if pc is None:
            raise forbidden(res, pod["metadata"]["name"], f"no PriorityClass with name {name} was found")
    else:
        defaults = [c for c in classes if c.get("globalDefault")]
        pc = min(defaults, key=lambda c: c.get("value", 0)) if defaults else None
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc.get("value", 0)) if pc else 0
    if "priority" in spec and spec["priority"] != value:
        raise forbidden(res, pod["metadata"]["name"],
                        f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                        f"priority admission controller computed {value} from the given PriorityClass name")
    spec["priority"] = value
    if pc is not None:
        spec["preemptionPolicy"] = pc.get("preemptionPolicy", "PreemptLowerPriority")


def pod_usage(pod: Obj) -> dict[str, Fraction]:
    """What one pod counts against quota: pods, requests.*, limits.* (init containers by max, sidecars summed)."""
    usage: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for section in ("requests", "limits"):
        total = _section_total(pod.get("spec") or {}, section)
        for key, value in total.items():
            usage[f"{section}.{key}"] = value
            if section == "requests" and key in COMPUTE:
                usage[key] = value
    return usage


def _section_total(spec: Obj, section: str) -> dict[str, Fraction]:
    """PodRequests / PodLimits (k8s.io/component-helpers/resource/helpers.go), which the quota evaluator uses:
    the containers summed; a sidecar (an init container with restartPolicy Always, KEP-753) runs beside them,
    so it is added to that sum and to every init container that starts after it; the pod asks the larger of
    that sum and the largest init step. (A v1.28 server dropped the field on admission: no sidecars there.)"""
    def amounts(c: Obj) -> dict[str, Fraction]:
        return {k: quantity.parse(v) for k, v in ((c.get("resources") or {}).get(section) or {}).items()}

    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for key, value in amounts(c).items():
            total[key] = total.get(key, Fraction(0)) + value
    sidecars: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or []:
        own = amounts(c)
        if c.get("restartPolicy") == "Always":
            for key, value in own.items():
                total[key] = total.get(key, Fraction(0)) + value
                sidecars[key] = sidecars.get(key, Fraction(0)) + value
            step = dict(sidecars)
        else:
            step = {k: own.get(k, Fraction(0)) + sidecars.get(k, Fraction(0)) for k in set(own) | set(sidecars)}
        for key, value in step.items():
            init[key] = max(init.get(key, Fraction(0)), value)
    for key, value in init.items():
        total[key] = max(total.get(key, Fraction(0)), value)
    return total


def _counts(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def pod_contribution(quota: Obj, pod: Obj) -> dict[str, Fraction]:
    """What one pod adds to a quota's keys: its usage if it is live and the quota's scopes track it."""
    return pod_usage(pod) if _counts(pod) and quota_scopes.matches(quota, pod) else {}


def recount(store: Store, quota: Obj) -> dict[str, Fraction]:
    """The pod usage of one quota summed over every pod of its namespace (what the incremental sums equal)."""
    totals = {key: Fraction(0) for key in (quota.get("spec") or {}).get("hard") or {}}
    for pod in store.view("pods", quota["metadata"]["namespace"]):
        for key, value in pod_contribution(quota, pod).items():
            if key in totals:
                totals[key] += value
    return totals


def usage_tracker(store: Store) -> QuotaUsage:
    """The store's incremental quota usage, registered as its observer on first use."""
    for observer in store.observers:
        tracker = getattr(observer, "__self__", None)
        if isinstance(tracker, QuotaUsage):
            return tracker
    tracker = QuotaUsage(pod_contribution)
    store.observers.append(tracker.observe)
    return tracker


def quota_used(store: Store, registry_plurals: Iterable[tuple[str, str]], quota: Obj) -> dict[str, str]:
    """status.used for one quota: the sum over the namespace's live pods plus object counts."""
    ns, hard = quota["metadata"]["namespace"], (quota.get("spec") or {}).get("hard") or {}
    totals = usage_tracker(store).totals(quota, lambda: recount(store, quota))
    for plural, qualified in registry_plurals:
        key = f"count/{qualified}"
        if key in totals and plural != "pods":
            totals[key] = Fraction(store.count(plural, ns))
    return {k: quantity.render(v, binary=quantity.is_binary(hard[k])) for k, v in totals.items()}


def check_quota(store: Store, res: Resource, pod: Obj, registry_plurals: Iterable[tuple[str, str]]) -> None:
    """ResourceQuota admission: deny a pod whose usage would exceed a quota of its namespace that tracks it
    (a scoped quota whose scopes do not match the pod neither constrains nor counts it)."""
    usage = pod_usage(pod)
    for quota in store.items("resourcequotas", pod["metadata"]["namespace"]):
        if not quota_scopes.matches(quota, pod):
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        _require_compute(res, pod, quota, hard)
        used = {k: quantity.parse(v) for k, v in quota_used(store, registry_plurals, quota).items()}
        failed = sorted(k for k in hard if k in usage and used[k] + usage[k] > quantity.parse(hard[k]))
        if failed:
            limited = {k: quantity.parse(hard[k]) for k in failed}
            raise forbidden(res, pod["metadata"]["name"],
                            f"exceeded quota: {quota['metadata']['name']}, requested: {_fmt(usage, hard, failed)}, "
                            f"used: {_fmt(used, hard, failed)}, limited: {_fmt(limited, hard, failed)}")


def _fmt(values: dict[str, Fraction], hard: Obj, keys: list[str]) -> str:
    return ",".join(f"{k}={quantity.render(values[k], binary=quantity.is_binary(hard[k]))}" for k in keys)


def _require_compute(res: Resource, pod: Obj, quota: Obj, hard: Obj) -> None:
    constrained = [k for k in hard if k in COMPUTE or k in ("requests.cpu", "requests.memory",
                                                              "limits.cpu", "limits.memory")]
    missing: list[str] = []
    for key in sorted(constrained):
        section, _, name = key.rpartition(".")
        section = section or "requests"
        for c in pod["spec"].get("containers") or []:
            if name not in ((c.get("resources") or {}).get(section) or {}):
                missing.append(key)
                break
    if missing:
        raise forbidden(res, pod["metadata"]["name"],
                        f"failed quota: {quota['metadata']['name']}: must specify {','.join(missing)}")


def mutate_pod(store: Store, res: Resource, pod: Obj) -> None:
    """Mutating admission for a Pod create (LimitRanger defaults, Priority)."""
    apply_limit_ranges(store, pod)
    apply_priority(store, res, pod)


def validate_pod(store: Store, res: Resource, pod: Obj, plurals: Iterable[tuple[str, str]]) -> None:
    """Validating admission for a Pod create (LimitRanger min/max, ResourceQuota)."""
    check_limit_ranges(store, res, pod)
    check_quota(store, res, pod, list(plurals))


__all__ = ["ApiError", "mutate_pod", "validate_pod", "default_limit_range", "quota_used", "pod_usage"]
