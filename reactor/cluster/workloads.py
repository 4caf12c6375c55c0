"""Pure conversion of raw Kubernetes objects (JSON dicts) into the model's values.

Knows where each kind keeps its pod template and how the API server reads quantities, quota (with its
scopes) and LimitRange; does no I/O of its own (`namespace_bounds` reads only through the reader it is
given). Kept apart from the gateway so it is testable on plain dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from reactor.cluster import compute
from reactor.core.model import Bounds, ComputeResources, Container, Kind, PodShape, Quota, Workload, WorkloadRef
from reactor.core.quantity import parse_quantity
from reactor.core.quantity import value as quantity_value
from reactor.policy.pod import compute_total
from reactor.state.annotations import read_state

ANNOTATION_PREFIX = "gpu-reactor.io/"


def gpu_count(resources: Mapping[str, Any] | None, resource: str) -> int:
    """GPUs a container holds: its limit (extended resources need request = limit), else its request."""
    resources = resources or {}
    raw = (resources.get("limits") or {}).get(resource)
    if raw is None:
        raw = (resources.get("requests") or {}).get(resource)
    return 0 if raw is None else quantity_value(raw)


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
    containers = to_containers(pod_spec.get("containers"), gpu_resource)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(ANNOTATION_PREFIX)}
    replicas = None if kind == Kind.CRONJOB else int(spec.get("replicas", 1))
    return Workload(
        ref=WorkloadRef(kind, meta.get("namespace", ""), meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        containers=containers,
        priority_class=pod_spec.get("priorityClassName"),
        init_containers=to_containers(pod_spec.get("initContainers"), gpu_resource),
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
        pods=pod_shape(pod_spec),
    )


def to_containers(raw: Any, gpu_resource: str) -> tuple[Container, ...]:
    """A pod spec's containers (or init containers: `sidecar` when restartPolicy is Always) as values."""
    return tuple(
        Container(name=c.get("name", ""), gpus=gpu_count(c.get("resources"), gpu_resource),
                  cpu=compute.container_compute(c.get("resources")),
                  memory=compute.container_compute(c.get("resources"), "memory"),
                  sidecar=c.get("restartPolicy") == "Always")
        for c in raw or [] if isinstance(c, dict)
    )


def pod_shape(pod_spec: Mapping[str, Any]) -> PodShape:
    """What quota scopes see of the template's pods: QoS BestEffort (only positive cpu/memory count, as in
    ComputePodQOS), activeDeadlineSeconds >= 0, and pod (anti-)affinity terms naming other namespaces."""
    containers = list(pod_spec.get("containers") or []) + list(pod_spec.get("initContainers") or [])
    compute = any(_positive(((c.get("resources") or {}).get(section) or {}).get(r))
                  for c in containers for section in ("requests", "limits") for r in ("cpu", "memory"))
    deadline = pod_spec.get("activeDeadlineSeconds")
    return PodShape(best_effort=not compute,
                    terminating=isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0,
                    cross_namespace_affinity=_cross_namespace(pod_spec.get("affinity") or {}),
                    cpu=pod_usage(pod_spec, "cpu"), memory=pod_usage(pod_spec, "memory"))


def pod_usage(pod_spec: Mapping[str, Any], resource: str) -> ComputeResources | None:
    """One pod's whole `resource` requests and limits as ResourceQuota charges a new pod (pkg/quota/v1/evaluator/
    core/pods.go podComputeUsageHelper: resourcehelper.PodRequests / PodLimits): every container summed, each
    sidecar (an init container with restartPolicy Always) added to the sum, each other init container by the max
    rule (it runs alone beside the sidecars started before it). A container's limit without a request is its
    request too (the API server defaults it so before admission). None where no container sets the resource."""
    found = [compute.container_compute(c.get("resources"), resource)
             for c in pod_spec.get("containers") or [] if isinstance(c, Mapping)]
    inits = [(compute.container_compute(c.get("resources"), resource), c.get("restartPolicy") == "Always")
             for c in pod_spec.get("initContainers") or [] if isinstance(c, Mapping)]
    if all(value is None for value in found + [value for value, _ in inits]):
        return None
    return compute_total(found, inits)


def _positive(raw: Any) -> bool:
    try:
        return raw is not None and parse_quantity(raw) > 0
    except ValueError:
        return False


def _cross_namespace(affinity: Mapping[str, Any]) -> bool:
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        found = list(terms.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        weighted = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        found += [t.get("podAffinityTerm") or {} for t in weighted]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in found):
            return True
    return False


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


# -- a namespace's bounds: LimitRange min/max and every ResourceQuota with its scope ------------------------

Obj = Mapping[str, Any]
COMPUTE = ("cpu", "memory")


class BoundsReader(Protocol):
    """The part of a notification's reader (resolve.Reader) the bounds need."""

    def list_objects(self, kind: str, namespace: str) -> list[dict[str, Any]]: ...
    def priority_class_objects(self) -> list[dict[str, Any]]: ...


def namespace_bounds(reader: BoundsReader, namespace: str, gpu_resource: str) -> Bounds:
    """The bounds of `namespace`, read once per notification by the caller's cache."""
    quotas = reader.list_objects("ResourceQuota", namespace)
    classes = reader.priority_class_objects() if any(_class_scoped(q) for q in quotas) else None
    return to_bounds(reader.list_objects("LimitRange", namespace), quotas, gpu_resource, priority_classes=classes)


def to_bounds(limit_ranges: Iterable[Obj], quotas: Iterable[Obj], gpu_resource: str, *,
              priority_classes: Iterable[Obj] | None = None) -> Bounds:
    """The tightest LimitRange min/max for the GPU resource, per container and per pod, each quota's
    `requests.<gpu>` line and its pod-count lines, and which compute lines (cpu, memory) the quotas have."""
    items = [item for lr in limit_ranges for item in (lr.get("spec") or {}).get("limits") or []]
    lo, hi = _limit_range(items, gpu_resource, "Container")
    pod_lo, pod_hi = _limit_range(items, gpu_resource, "Pod")
    key = f"requests.{gpu_resource}"
    quotas = list(quotas)
    lines = sorted((q for q in (to_quota(obj, key) for obj in quotas) if q is not None), key=lambda q: q.name)
    counts = sorted((line for obj in quotas for line in compute.compute_quota_lines(obj, "pods")), key=lambda q: q.key)
    # Only which compute lines exist: their values are read (ComputeBounds) where a change's pods need them.
    kinds = frozenset(r for r in COMPUTE if any(compute.compute_quota_lines(obj, r) for obj in quotas))
    return Bounds(min_gpus=lo, max_gpus=hi, pod_min_gpus=pod_lo, pod_max_gpus=pod_hi, quotas=tuple(lines),
                  default_priority_class=default_class(priority_classes or ()),
                  defaults_compute=any(_fills_compute(item) for item in items), compute_lines=kinds,
                  pod_quotas=tuple(counts))


def _limit_range(items: list[Obj], gpu_resource: str, kind: str) -> tuple[int | None, int | None]:
    """The tightest min and max of the `kind` items (Container: per container; Pod: of the pod's sum)."""
    lo: int | None = None
    hi: int | None = None
    for item in items:
        if item.get("type") != kind:
            continue
        if gpu_resource in (item.get("min") or {}):
            value = quantity_value(item["min"][gpu_resource])
            lo = value if lo is None else max(lo, value)
        if gpu_resource in (item.get("max") or {}):
            value = quantity_value(item["max"][gpu_resource])
            hi = value if hi is None else min(hi, value)
    return lo, hi


def to_quota(obj: Obj, key: str) -> Quota | None:
    """The quota's line for `key` (hard from status, as the API server enforces it, else spec), or None."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    hard_raw = (status.get("hard") or {}).get(key, (spec.get("hard") or {}).get(key))
    if hard_raw is None:
        return None
    used = quantity_value((status.get("used") or {}).get(key, 0))
    name = str((obj.get("metadata") or {}).get("name", ""))
    return Quota(name=name, hard=quantity_value(hard_raw), used=used, scopes=compute.scope_terms(spec))


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


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the object's controlling owner, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    return None
