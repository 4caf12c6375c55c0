"""Pure conversion of raw Kubernetes objects (JSON dicts) into the model's values.

Knows where each kind keeps its pod template and how the API server reads quantities, quota
and LimitRange; does no I/O. Kept apart from the gateway so it is testable on plain dicts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .annotations import read_state
from .model import Bounds, Container, Kind, Workload, WorkloadRef

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi)?$")
ANNOTATION_PREFIX = "gpu-reactor.io/"


def parse_quantity(raw: Any) -> Decimal:
    """A Kubernetes quantity ("4", "500m", "1Gi") as a Decimal; unparseable → ValueError."""
    text = str(raw).strip()
    m = _QUANTITY.match(text)
    if m is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = m.groups()
    try:
        value = Decimal(number)
    except InvalidOperation as e:
        raise ValueError(f"not a quantity: {text!r}") from e
    return value / 1000 if suffix == "m" else value * _SUFFIX[suffix or ""]


def gpu_count(resources: Mapping[str, Any] | None, resource: str) -> int:
    """GPUs a container holds: its limit (extended resources need request = limit), else its request."""
    resources = resources or {}
    raw = (resources.get("limits") or {}).get(resource)
    if raw is None:
        raw = (resources.get("requests") or {}).get(resource)
    return 0 if raw is None else int(parse_quantity(raw))


def pod_template(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The pod template of an owner: a CronJob nests it in its jobTemplate."""
    spec = obj.get("spec") or {}
    if kind == Kind.CRONJOB:
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    if kind == Kind.POD:
        return {"metadata": obj.get("metadata") or {}, "spec": spec}
    return spec.get("template") or {}


def template_path(kind: str) -> tuple[str, ...]:
    """Where a patch must put pod-spec fields for this kind."""
    if kind == Kind.CRONJOB:
        return ("spec", "jobTemplate", "spec", "template", "spec")
    return ("spec", "template", "spec")


def to_workload(
    obj: Mapping[str, Any], kind: str, gpu_resource: str, *, hpa_managed: bool = False, via: WorkloadRef | None = None
) -> Workload:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod_spec = pod_template(obj, kind).get("spec") or {}
    containers = tuple(
        Container(name=c.get("name", ""), gpus=gpu_count(c.get("resources"), gpu_resource))
        for c in pod_spec.get("containers") or []
    )
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(ANNOTATION_PREFIX)}
    replicas = None if kind == Kind.CRONJOB else int(spec.get("replicas", 1))
    return Workload(
        ref=WorkloadRef(kind, meta.get("namespace", ""), meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        containers=containers,
        priority_class=pod_spec.get("priorityClassName"),
        replicas=replicas,
        generation=int(meta.get("generation", 0)),
        observed_generation=int(status.get("observedGeneration", meta.get("generation", 0))),
        updated_replicas=status.get("updatedReplicas") if kind in (Kind.DEPLOYMENT, Kind.STATEFULSET) else None,
        max_surge=max_surge(spec, replicas) if kind == Kind.DEPLOYMENT else 0,
        hpa_managed=hpa_managed,
        state=read_state(annotations),
        via=via,
        annotations=annotations,
        uid=str(meta.get("uid", "")),
    )


def max_surge(spec: Mapping[str, Any], replicas: int | None) -> int:
    """Extra pods a rolling update may add: `maxSurge`, 25% rounded up by default; 0 for Recreate."""
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    raw = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(raw, str) and raw.endswith("%"):
        return math.ceil((replicas or 0) * int(raw[:-1]) / 100)
    return int(raw)


def hpa_targets(hpas: Iterable[Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    """(kind, name) of every workload an HPA scales (KEDA's ScaledObjects create such HPAs)."""
    targets = set()
    for hpa in hpas:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if ref.get("kind") and ref.get("name"):
            targets.add((ref["kind"], ref["name"]))
    return frozenset(targets)


def to_bounds(
    limit_ranges: Iterable[Mapping[str, Any]], quotas: Iterable[Mapping[str, Any]], gpu_resource: str
) -> Bounds:
    """The tightest LimitRange min/max and the ResourceQuota with the least headroom for the GPU resource."""
    lo: int | None = None
    hi: int | None = None
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") not in ("Container", "Pod"):
                continue
            if item.get("type") == "Container" and gpu_resource in (item.get("min") or {}):
                value = int(parse_quantity(item["min"][gpu_resource]))
                lo = value if lo is None else max(lo, value)
            if gpu_resource in (item.get("max") or {}):
                value = int(parse_quantity(item["max"][gpu_resource]))
                hi = value if hi is None else min(hi, value)
    hard, used = _tightest_quota(quotas, f"requests.{gpu_resource}")
    return Bounds(min_gpus=lo, max_gpus=hi, quota_hard=hard, quota_used=used)


def _tightest_quota(quotas: Iterable[Mapping[str, Any]], key: str) -> tuple[int | None, int]:
    best: tuple[int | None, int] = (None, 0)
    for quota in quotas:
        status = quota.get("status") or {}
        hard_raw = (status.get("hard") or {}).get(key, ((quota.get("spec") or {}).get("hard") or {}).get(key))
        if hard_raw is None:
            continue
        hard = int(parse_quantity(hard_raw))
        used = int(parse_quantity((status.get("used") or {}).get(key, 0)))
        if best[0] is None or hard - used < best[0] - best[1]:
            best = (hard, used)
    return best


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the object's controlling owner, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    return None
