"""A namespace's bounds for the GPU resource: LimitRange min/max, and every ResourceQuota with its scope.

`to_bounds` is pure conversion of raw objects (JSON dicts) into `Bounds`; `namespace_bounds` does the
reads through a notification's reader, and lists PriorityClasses only when a quota is scoped by one
(to know the class admission gives a pod that names none). Neither decides anything.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .model import Bounds, Quota, ScopeTerm
from .workloads import parse_quantity

Obj = Mapping[str, Any]
COMPUTE = ("cpu", "memory")


class BoundsReader(Protocol):
    """The part of a notification's reader (resolve.Reader) the bounds need."""

    def list(self, kind: str, namespace: str) -> builtins.list[dict[str, Any]]: ...
    def priority_class_objects(self) -> builtins.list[dict[str, Any]]: ...


def namespace_bounds(reader: BoundsReader, namespace: str, gpu_resource: str) -> Bounds:
    """The bounds of `namespace`, read once per notification by the caller's cache."""
    quotas = reader.list("ResourceQuota", namespace)
    classes = reader.priority_class_objects() if any(_class_scoped(q) for q in quotas) else None
    return to_bounds(reader.list("LimitRange", namespace), quotas, gpu_resource, priority_classes=classes)


def to_bounds(limit_ranges: Iterable[Obj], quotas: Iterable[Obj], gpu_resource: str, *,
              priority_classes: Iterable[Obj] | None = None) -> Bounds:
    """The tightest LimitRange min/max for the GPU resource, and each quota's `requests.<gpu>` line."""
    items = [item for lr in limit_ranges for item in (lr.get("spec") or {}).get("limits") or []]
    lo, hi = _limit_range(items, gpu_resource)
    key = f"requests.{gpu_resource}"
    lines = sorted((q for q in (to_quota(obj, key) for obj in quotas) if q is not None), key=lambda q: q.name)
    return Bounds(min_gpus=lo, max_gpus=hi, quotas=tuple(lines),
                  default_priority_class=default_class(priority_classes or ()),
                  defaults_compute=any(_fills_compute(item) for item in items))


def _limit_range(items: list[Obj], gpu_resource: str) -> tuple[int | None, int | None]:
    lo: int | None = None
    hi: int | None = None
    for item in items:
        if item.get("type") not in ("Container", "Pod"):
            continue
        if item.get("type") == "Container" and gpu_resource in (item.get("min") or {}):
            value = int(parse_quantity(item["min"][gpu_resource]))
            lo = value if lo is None else max(lo, value)
        if gpu_resource in (item.get("max") or {}):
            value = int(parse_quantity(item["max"][gpu_resource]))
            hi = value if hi is None else min(hi, value)
    return lo, hi


def to_quota(obj: Obj, key: str) -> Quota | None:
    """The quota's line for `key` (hard from status, as the API server enforces it, else spec), or None."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    hard_raw = (status.get("hard") or {}).get(key, (spec.get("hard") or {}).get(key))
    if hard_raw is None:
        return None
    used = int(parse_quantity((status.get("used") or {}).get(key, 0)))
    terms = [ScopeTerm(str(s)) for s in spec.get("scopes") or []]
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        terms.append(ScopeTerm(str(expr.get("scopeName", "")), str(expr.get("operator", "")),
                               tuple(str(v) for v in expr.get("values") or [])))
    name = str((obj.get("metadata") or {}).get("name", ""))
    return Quota(name=name, hard=int(parse_quantity(hard_raw)), used=used, scopes=tuple(terms))


def default_class(priority_classes: Iterable[Obj]) -> str | None:
    """The globalDefault PriorityClass admission gives a pod that names none (the lowest value if several)."""
    defaults = [pc for pc in priority_classes if pc.get("globalDefault")]
    if not defaults:
        return None
    chosen = min(defaults, key=lambda pc: int(pc.get("value", 0)))
    return str((chosen.get("metadata") or {}).get("name", "")) or None


def _class_scoped(quota: Obj) -> bool:
    exprs = ((quota.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []
    return any(e.get("scopeName") == "PriorityClass" for e in exprs)


def _fills_compute(item: Obj) -> bool:
    """A Container item that fills cpu or memory in (its max defaults the limit, its min the request)."""
    if item.get("type") != "Container":
        return False
    sections = ("default", "defaultRequest", "max", "min")
    return any(r in (item.get(section) or {}) for section in sections for r in COMPUTE)
