"""Field validation and defaulting that kube-apiserver applies before admission and storage.

Pure functions returning `FieldError` lists (upstream `field.ErrorList` wording); no store access.
"""

from __future__ import annotations

import copy
from typing import Any

from . import quantity
from .status import FieldError

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
    for name, raw in requests.items():
        if not is_extended(name):
            continue
        if name not in limits:
            errors.append(FieldError(f"{path}.limits", "Required value",
                                     "Limit must be set for non overcommitable resources"))
            continue
        req, lim = _safe(raw), _safe(limits[name])
        if req is not None and lim is not None and req != lim:
            errors.append(FieldError(f"{path}.requests[{name}]", "Invalid value",
                                     f"must be equal to {name} limit of {quantity.render(lim)}",
                                     quantity.render(req)))
    return errors


def _safe(raw: object) -> Any:
    try:
        return quantity.parse(raw)
    except ValueError:
        return None


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
    return errors


def _job_restart_policy(spec: Obj, prefix: str) -> list[FieldError]:
    """A Job's pods must not restart forever: OnFailure or Never (an unset policy defaults to Always)."""
    policy = spec.get("restartPolicy") or "Always"
    if policy in ("OnFailure", "Never"):
        return []
    return [FieldError(f"{prefix}.restartPolicy", "Unsupported value", 'supported values: "OnFailure", "Never"',
                       policy)]


def _validate_selector(obj: Obj) -> list[FieldError]:
    from .selectors import match_label_selector

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
