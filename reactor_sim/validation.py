"""Field validation and defaulting that kube-apiserver applies before admission and storage.

Pure functions returning `FieldError` lists (upstream `field.ErrorList` wording); no store access.
"""

from __future__ import annotations

import copy
from typing import Any

from reactor_sim import quantity, quota_scopes
from reactor_sim.event_validation import validate_core_event
from reactor_sim.objects import qos_class
from reactor_sim.status import FieldError

Obj = dict[str, Any]
NATIVE_DOMAIN = "kubernetes.io"
CONTAINER_LISTS = ("initContainers", "containers")

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)

# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def is_extended(resource: str) -> bool:
    """Extended resources (nvidia.com/gpu) may not be overcommitted: request must equal limit."""
    if "/" not in resource:
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == NATIVE_DOMAIN or domain.endswith("." + NATIVE_DOMAIN) or resource.startswith("requests."))


def pod_spec(obj: Obj, kind: str) -> Obj | None:
    node: Any = obj
    for part in POD_SPEC_PATHS.get(kind, ()):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) and kind in POD_SPEC_PATHS else None


def default_pod(pod: Obj) -> None:
    """SetDefaults_Pod: a limit without a request sets the request to the limit."""
    for lst in CONTAINER_LISTS:
        for c in pod.get("spec", {}).get(lst) or []:
            res = c.setdefault("resources", {})
            limits = res.get("limits") or {}
            if limits:
                requests = res.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)


def validate_resources(spec: Obj, prefix: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for lst in CONTAINER_LISTS:
        for i, c in enumerate(spec.get(lst) or []):
            errors += _container_resources(c.get("resources") or {}, f"{prefix}.{lst}[{i}].resources")
    return errors


def _container_resources(res: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for section, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            try:
                value = quantity.parse(raw)
            except ValueError as e:
                errors.append(FieldError(f"{path}.{section}[{name}]", "Invalid value", str(e), str(raw)))
                continue
            if is_extended(name) and value.denominator != 1:
                errors.append(FieldError(f"{path}.{section}[{name}]", "Invalid value", "must be an integer",
                                         quantity.render(value)))
    for name in requests:
        if is_extended(name) and name not in limits:
            errors.append(FieldError(f"{path}.limits", "Required value",
                                     "Limit must be set for non overcommitable resources"))
    return errors + _requests_within_limits(requests, limits, f"{path}.requests")


def _requests_within_limits(requests: Obj, limits: Obj, path: str) -> list[FieldError]:
    """validateResourceRequirements: the error is on `requests` itself (no `[resource]` key), with the
    limit in the message; extended resources must equal their limit, the others not exceed it."""
    errors: list[FieldError] = []
    for name, raw in requests.items():
        req, lim = _safe(raw), _safe(limits.get(name))
        if req is None or lim is None or req == lim:
            continue
        if is_extended(name):
            errors.append(FieldError(path, "Invalid value", f"must be equal to {name} limit of "
                                     f"{_text(lim, limits[name])}", _text(req, raw)))
        elif req > lim:
            errors.append(FieldError(path, "Invalid value", f"must be less than or equal to {name} limit of "
                                     f"{_text(lim, limits[name])}", _text(req, raw)))
    return errors


def _text(value: Any, raw: object) -> str:
    """Quantity.String(): the canonical form, in binary units when it was written in them."""
    return quantity.render(value, binary=quantity.is_binary(raw))


def _safe(raw: object) -> Any:
    try:
        return quantity.parse(raw)
    except ValueError:
        return None


def drop_sidecar_restart_policy(new: Obj, old: Obj | None, kind: str) -> None:
    """dropDisabledFields (pkg/api/pod/util.go) with SidecarContainers off, as on a v1.28 server: every init
    container's `restartPolicy` is dropped, unless the object as stored already used it
    (restartableInitContainersInUse). The container is then an ordinary init container: it must finish before
    the others start."""
    spec = pod_spec(new, kind)
    before = pod_spec(old, kind) if old is not None else None
    if spec is None or any(_restartable(c) for c in (before or {}).get("initContainers") or []):
        return
    for c in spec.get("initContainers") or []:
        if isinstance(c, dict):
            c.pop("restartPolicy", None)


def validate_object(obj: Obj, kind: str) -> list[FieldError]:
    """Create/update validation for the workload kinds the reactor touches."""
    errors: list[FieldError] = []
    spec = pod_spec(obj, kind)
    if spec is not None:
        prefix = ".".join(POD_SPEC_PATHS[kind])
        if not spec.get("containers"):
            errors.append(FieldError(f"{prefix}.containers", "Required value", ""))
        errors += validate_resources(spec, prefix)
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        errors += _validate_selector(obj)
    if kind in ("Job", "CronJob") and spec is not None:
        errors += _job_restart_policy(spec, ".".join(POD_SPEC_PATHS[kind]))
    if kind == "ResourceQuota":
        errors += quota_scopes.validate(obj)
    if kind == "Event" and obj.get("apiVersion") == "v1":
        errors += validate_core_event(obj)
    return errors


def _job_restart_policy(spec: Obj, prefix: str) -> list[FieldError]:
    """A Job's pods must not restart forever: OnFailure or Never (an unset policy defaults to Always)."""
    policy = spec.get("restartPolicy") or "Always"
    if policy in ("OnFailure", "Never"):
        return []
    return [FieldError(f"{prefix}.restartPolicy", "Unsupported value", 'supported values: "OnFailure", "Never"',
                       policy)]


def _validate_selector(obj: Obj) -> list[FieldError]:
    from reactor_sim.selectors import match_label_selector

    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return [FieldError("spec.selector", "Required value", "")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not match_label_selector(selector, labels):
        rendered = "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"
        return [FieldError("spec.template.metadata.labels", "Invalid value",
                           "`selector` does not match template `labels`", _Raw(rendered))]
    return []


class _Raw(str):
    """A value rendered without quotes (Go's %v of a map)."""


def validate_pod_update(old: Obj, new: Obj) -> list[FieldError]:
    """ValidatePodUpdate: only images, activeDeadlineSeconds, toleration additions, grace period,
    and scheduling-gate removal may change on a running pod."""
    a, b = copy.deepcopy(old.get("spec") or {}), copy.deepcopy(new.get("spec") or {})
    for spec in (a, b):
        for lst in CONTAINER_LISTS:
            for c in spec.get(lst) or []:
                c.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("terminationGracePeriodSeconds", None)
    old_tol, new_tol = a.pop("tolerations", None) or [], b.pop("tolerations", None) or []
    old_gates, new_gates = a.pop("schedulingGates", None) or [], b.pop("schedulingGates", None) or []
    ok = (a == b and all(t in new_tol for t in old_tol) and all(g in old_gates for g in new_gates))
    if ok:
        return []
    return [FieldError("spec", "Forbidden", POD_UPDATE_FORBIDDEN + _spec_diff(a, b))]


def _spec_diff(a: Obj, b: Obj) -> str:
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    lines = "".join(f"\n-  {k}: {a.get(k)!r}\n+  {k}: {b.get(k)!r}" for k in changed)
    return "\n  core.PodSpec{" + lines + "\n  }\n" if changed else ""


def validate_job_update(old: Obj, new: Obj) -> list[FieldError]:
    """A Job's pod template is immutable (ValidateJobSpecUpdate)."""
    old_t, new_t = (old.get("spec") or {}).get("template"), (new.get("spec") or {}).get("template")
    if old_t != new_t:
        return [FieldError("spec.template", "Invalid value", "field is immutable", _Raw("core.PodTemplateSpec{...}"))]
    return []


# -- the pods/resize subresource (in-place pod resize, GA in 1.35) -----------------------------------
#
# Upstream: podResizeStrategy in pkg/registry/core/pod/strategy.go keeps only containers[*].resources
# and resizePolicy from the request; ValidatePodResize in pkg/apis/core/validation/validation.go
# then decides what of that may change.

RESIZABLE = ("cpu", "memory")
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
ONLY_CPU_MEMORY = "only cpu and memory resources are mutable"


def drop_non_resize_updates(new: Obj, old: Obj) -> Obj:
    """dropNonResizeUpdates: the old pod with each container's `resources` and `resizePolicy` taken from
    the request; every other change (spec, metadata, status) is silently dropped. A request that adds,
    removes, reorders or renames containers keeps that list as sent, for validation to refuse."""
    out = copy.deepcopy(old)
    new_spec, spec = new.get("spec") or {}, out.setdefault("spec", {})
    if any(len(new_spec.get(lst) or []) != len(spec.get(lst) or []) for lst in CONTAINER_LISTS):
        out["spec"] = copy.deepcopy(new_spec)
        return out
    for lst in CONTAINER_LISTS:
        sent, kept = new_spec.get(lst) or [], spec.get(lst) or []
        if any(s.get("name") != k.get("name") for s, k in zip(sent, kept, strict=False)):
            spec[lst] = copy.deepcopy(sent)
            continue
        for s, k in zip(sent, kept, strict=True):
            for key in ("resources", "resizePolicy"):
                if key in s:
                    k[key] = copy.deepcopy(s[key])
                else:
                    k.pop(key, None)
    return out


def validate_pod_resize(old: Obj, new: Obj, *, memory_decrease: bool = True) -> list[FieldError]:
    """ValidatePodResize: `new` is what drop_non_resize_updates made of the request. `memory_decrease` False
    plays v1.33's rule: a memory limit may not be lowered unless the container's resizePolicy for memory is
    RestartContainer (1.34 lifted it: kubernetes#133012)."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _pod_level_resources(old_spec) or _pod_level_resources(new_spec):
        return [FieldError("", "Forbidden", "pods with pod-level resources cannot be resized")]
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [FieldError("", "Forbidden", "static pods cannot be resized")]
    if ((old_spec.get("os") or {}).get("name")) == "windows":
        return [FieldError("", "Forbidden", "windows pods cannot be resized")]
    errors: list[FieldError] = []
    old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old)
    if old_qos != qos_class(new):
        errors.append(FieldError("spec", "Invalid value", "Pod QOS Class may not change as a result of resizing",
                                 (new.get("status") or {}).get("qosClass") or ""))
    if not _resize_supported(old):
        errors.append(FieldError("spec", "Forbidden", "Pod running on node without support for resize"))
    pairs = {lst: list(zip(new_spec.get(lst) or [], old_spec.get(lst) or [], strict=False)) for lst in CONTAINER_LISTS}
    for lst in ("initContainers", "containers"):
        for i, (n, o) in enumerate(pairs[lst]):
            if lst == "containers" or _restartable(o):
                errors += _container_resize(n, o, f"spec.{lst}[{i}].resources")
                if not memory_decrease:
                    errors += _memory_limit_decrease(n, o, f"spec.{lst}[{i}].resources")
    for n, o in pairs["containers"]:
        if not _same_container(_keep_old_cpu_memory(n, o), o):
            errors.append(FieldError("spec", "Forbidden", ONLY_CPU_MEMORY))
    for n, o in pairs["initContainers"]:
        if _restartable(o) and not _same_container(_keep_old_cpu_memory(n, o), o):
            errors.append(FieldError("spec", "Forbidden", "only cpu and memory resources for sidecar containers "
                                                          "are mutable"))
        elif not _restartable(o) and not _same_container(n, o):
            errors.append(FieldError("spec", "Forbidden", "resources for non-sidecar init containers are immutable"))
    if errors:
        return errors
    munged = copy.deepcopy(new_spec)
    for lst in CONTAINER_LISTS:
        if lst in munged and len(munged[lst] or []) == len(old_spec.get(lst) or []):
            munged[lst] = [_keep_old_cpu_memory(n, o) if lst == "containers" or _restartable(o) else n
                           for n, o in zip(munged[lst] or [], old_spec.get(lst) or [], strict=True)]
    if not _same_spec(munged, old_spec):
        errors.append(FieldError("spec", "Forbidden", ONLY_CPU_MEMORY))
    return errors


def _pod_level_resources(spec: Obj) -> bool:
    res = spec.get("resources") or {}
    return bool(res.get("requests") or res.get("limits"))


def _restartable(container: Obj) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return container.get("restartPolicy") == "Always"


def _resize_supported(pod: Obj) -> bool:
    """isPodResizeRequestSupported: the first running container's status must report `resources`
    (the node's kubelet supports resize); with no running container, assume it does."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if (status.get("state") or {}).get("running") is not None:
            return status.get("resources") is not None
    return True


def _container_resize(new: Obj, old: Obj, path: str) -> list[FieldError]:
    """validateContainerResize: requests and limits may change but not be removed."""
    errors: list[FieldError] = []
    new_res, old_res = new.get("resources") or {}, old.get("resources") or {}
    for section in ("requests", "limits"):
        kept = new_res.get(section) or {}
        if any(name not in kept for name in old_res.get(section) or {}):
            errors.append(FieldError(f"{path}.{section}", "Forbidden", f"resource {section} cannot be removed"))
    return errors


def _memory_limit_decrease(new: Obj, old: Obj, path: str) -> list[FieldError]:
    """v1.33 validateContainerResize: a lower memory limit only with resizePolicy RestartContainer for memory."""
    before = _safe(((old.get("resources") or {}).get("limits") or {}).get("memory"))
    after = _safe(((new.get("resources") or {}).get("limits") or {}).get("memory"))
    if before is None or after is None or after >= before:
        return []
    policy = {p.get("resourceName"): p.get("restartPolicy") for p in new.get("resizePolicy") or []
              if isinstance(p, dict)}
    if policy.get("memory") == "RestartContainer":
        return []
    return [FieldError(f"{path}.limits[memory]", "Forbidden",
                       "memory limits cannot be decreased unless resizePolicy is RestartContainer")]


def _keep_old_cpu_memory(new: Obj, old: Obj) -> Obj:
    """dropCPUMemoryResourcesFromContainer: `new` with cpu and memory as they were in `old`, so that
    any difference left is a change to something else. (Upstream skips a section `old` did not have at
    all, which lets an extended resource be added there; here that counts as a change.)"""
    out = copy.deepcopy(new)
    new_res, old_res = new.get("resources") or {}, old.get("resources") or {}
    res: Obj = {}
    for section in ("limits", "requests"):
        kept = {k: v for k, v in (new_res.get(section) or {}).items() if k not in RESIZABLE}
        kept.update({k: v for k, v in (old_res.get(section) or {}).items() if k in RESIZABLE})
        if kept:
            res[section] = kept
    out["resources"] = res
    return out


def _normal_container(c: Obj) -> Obj:
    """A container for semantic comparison: quantities by value, empty resource sections dropped."""
    out = dict(c)
    res = c.get("resources") or {}
    norm = {key: value for key, value in res.items() if value}
    for section in ("limits", "requests"):
        if isinstance(norm.get(section), dict):
            norm[section] = {k: v if _safe(v) is None else _safe(v) for k, v in norm[section].items()}
    out.pop("resources", None)
    if norm:
        out["resources"] = norm
    return out


def _same_container(a: Obj, b: Obj) -> bool:
    return _normal_container(a) == _normal_container(b)


def _same_spec(a: Obj, b: Obj) -> bool:
    def norm(spec: Obj) -> Obj:
        return {**spec, **{lst: [_normal_container(c) for c in spec.get(lst) or []]
                           for lst in CONTAINER_LISTS if spec.get(lst)}}
    return norm(a) == norm(b)
