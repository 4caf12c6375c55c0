"""ResourceQuota scopes as kube-apiserver's pod quota evaluator reads them (pkg/quota/v1/evaluator/core/pods.go
`podMatchesScopeFunc`, pkg/quota/v1/generic `Matches`), and their validation (ValidateResourceQuota).

`spec.scopes` are `Exists` requirements on the named scope; `spec.scopeSelector.matchExpressions` adds its own.
A quota tracks a pod only when every requirement matches. Pure functions over plain objects: no store.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.objects import qos_class
from reactor_sim.status import FieldError

Obj = dict[str, Any]
POD_STATE_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "CrossNamespacePodAffinity")
STANDARD_SCOPES = (*POD_STATE_SCOPES[:4], "PriorityClass", "CrossNamespacePodAffinity")
# Standard quota resource names a scope may cap (helper.IsResourceQuotaScopeValidForResource); extended
# resources such as requests.nvidia.com/gpu are not standard names, so every scope may cap them.
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_STANDARD_QUOTA = _POD_COUNT | _POD_COMPUTE | frozenset({
    "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims",
    "requests.storage", "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage",
    "services.nodeports", "services.loadbalancers"})


def requirements(quota: Obj) -> list[Obj]:
    """getScopeSelectorsFromQuota: the scopes as `Exists` requirements, then the scopeSelector's expressions."""
    spec = quota.get("spec") or {}
    out: list[Obj] = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    return out + list(((spec.get("scopeSelector") or {}).get("matchExpressions")) or [])


def matches(quota: Obj, pod: Obj) -> bool:
    """Whether the quota tracks this pod: every scope requirement matches (no scope matches every pod)."""
    return all(requirement_matches(r, pod) for r in requirements(quota))


def requirement_matches(req: Obj, pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    scope = req.get("scopeName")
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and deadline >= 0
        return terminating == (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        return (qos_class(pod) == "BestEffort") == (scope == "BestEffort")
    if scope == "PriorityClass":
        return _class_matches(req, spec.get("priorityClassName") or "")
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec)
    return False


def _class_matches(req: Obj, name: str) -> bool:
    """A label selector on the one-label set {PriorityClass: name} (no label when the pod has no class)."""
    operator, values = req.get("operator"), req.get("values") or []
    if operator == "Exists":
        return bool(name)
    if operator == "DoesNotExist":
        return not name
    if operator == "In":
        return bool(name) and name in values
    if operator == "NotIn":
        return not name or name not in values
    return False


def _cross_namespace_affinity(spec: Obj) -> bool:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        weighted = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [t.get("podAffinityTerm") or {} for t in weighted]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in required + preferred):
            return True
    return False


def validate(quota: Obj) -> list[FieldError]:
    """validateResourceQuotaScopes + validateScopedResourceSelectorRequirement (upstream wording)."""
    spec = quota.get("spec") or {}
    hard = list((spec.get("hard") or {}).keys())
    errors: list[FieldError] = []
    scopes = list(spec.get("scopes") or [])
    for scope in scopes:
        errors += _scope_errors("spec.scopes", scope, hard, scopes)
    errors += _conflicts("spec.scopes", scopes, scopes)
    selector = spec.get("scopeSelector")
    if isinstance(selector, dict):
        exprs = list(selector.get("matchExpressions") or [])
        errors += [e for r in exprs for e in _expression_errors(r, hard, selector)]
        errors += _conflicts("spec.scopeSelector.matchExpressions", [r.get("scopeName") for r in exprs], selector)
    return errors


def _scope_errors(path: str, scope: Any, hard: list[str], shown: Any) -> list[FieldError]:
    if scope not in STANDARD_SCOPES:
        return [FieldError(path, "Invalid value", "unsupported scope", shown)]
    bad = [k for k in hard if k in _STANDARD_QUOTA and not _scope_valid_for(scope, k)]
    return [FieldError(path, "Invalid value", "unsupported scope applied to resource", shown)] if bad else []


def _scope_valid_for(scope: str, resource: str) -> bool:
    if scope == "BestEffort":
        return resource in _POD_COUNT
    return resource in _POD_COUNT or resource in _POD_COMPUTE


def _expression_errors(req: Obj, hard: list[str], selector: Obj) -> list[FieldError]:
    path = "spec.scopeSelector.matchExpressions"
    scope, operator, values = req.get("scopeName"), req.get("operator"), req.get("values") or []
    if scope not in STANDARD_SCOPES:
        errors = [FieldError(f"{path}.scopeName", "Invalid value", "unsupported scope", scope)]
    else:
        errors = _scope_errors(path, scope, hard, selector)
    if scope in POD_STATE_SCOPES and operator != "Exists":
        errors.append(FieldError(f"{path}.operator", "Invalid value",
                                 "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                                 "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                                 "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                                 operator))
    if operator in ("In", "NotIn") and not values:
        errors.append(FieldError(f"{path}.values", "Required value",
                                 "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(FieldError(f"{path}.values", "Invalid value",
                                 "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                                 values))
    elif operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
        errors.append(FieldError(f"{path}.operator", "Invalid value", "not a valid selector operator", operator))
    return errors


def _conflicts(path: str, scopes: list[Any], shown: Any) -> list[FieldError]:
    found = set(scopes)
    pairs = ({"BestEffort", "NotBestEffort"}, {"Terminating", "NotTerminating"})
    return [FieldError(path, "Invalid value", "conflicting scopes", shown) for pair in pairs if pair <= found]
