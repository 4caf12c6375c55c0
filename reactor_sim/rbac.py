"""RBAC authorization as kube-apiserver decides it: `system:masters` first, then the rules of every
ClusterRoleBinding and (in the request's namespace) RoleBinding whose subjects name the user.

Rules match by verb, API group, resource (`deployments/scale`, `*/scale`, `*`), resourceNames and
nonResourceURLs (`/apis/*`). A binding whose role is missing adds an `RBAC: … not found` reason to the
refusal, as upstream does. Reads the store, never writes it; also holds the bootstrap policy that a
cluster starts with.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactor_sim.authn import AUTHENTICATED, MASTERS, UNAUTHENTICATED, User
from reactor_sim.registry import RBAC_GROUP, Resource
from reactor_sim.routing import RequestInfo
from reactor_sim.status import ApiError, FieldError, invalid
from reactor_sim.store import Store

Obj = dict[str, Any]
Rule = dict[str, Any]


def authorize(store: Store, user: User, info: RequestInfo) -> tuple[bool, str]:
    """(allowed, reason): which binding allowed it, or the roles that could not be resolved."""
    if MASTERS in user.groups:
        return True, ""
    errors: list[str] = []
    for source, rules, error in _bound_rules(store, user, info.namespace):
        if error:
            errors.append(error)
        elif any(rule_allows(info, rule) for rule in rules):
            return True, f"RBAC: allowed by {source}"
    return False, f"RBAC: {_aggregate(errors)}" if errors else ""


def _bound_rules(store: Store, user: User, namespace: str) -> Iterator[tuple[str, list[Rule], str]]:
    """(binding described, its role's rules, a resolution error) for each binding that applies, cluster
    bindings first."""
    for binding in store.items("clusterrolebindings"):
        subject = _applies(user, binding.get("subjects") or [], "")
        if subject is not None:
            yield (_describe(binding, subject, ""), *_role_rules(store, binding.get("roleRef") or {}, ""))
    if namespace:
        for binding in store.items("rolebindings", namespace):
            subject = _applies(user, binding.get("subjects") or [], namespace)
            if subject is not None:
                yield (_describe(binding, subject, namespace),
                       *_role_rules(store, binding.get("roleRef") or {}, namespace))


def _describe(binding: Obj, subject: Obj, namespace: str) -> str:
    """`RoleBinding "name/ns" of ClusterRole "role" to ServiceAccount "sa/ns"`, as upstream's describers."""
    ref, name = binding.get("roleRef") or {}, binding["metadata"]["name"]
    who = f'{subject.get("kind")} "{subject.get("name")}"'
    if subject.get("kind") == "ServiceAccount":
        who = f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or namespace}"'
    where = f'RoleBinding "{name}/{namespace}"' if namespace else f'ClusterRoleBinding "{name}"'
    return f'{where} of {ref.get("kind")} "{ref.get("name")}" to {who}'


def _applies(user: User, subjects: list[Obj], namespace: str) -> Obj | None:
    """The first subject that names the user, if any."""
    for subject in subjects:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User" and name == user.name:
            return subject
        if kind == "Group" and name in user.groups:
            return subject
        if kind == "ServiceAccount":
            # A RoleBinding may name a ServiceAccount of its own namespace without a namespace.
            sa_namespace = subject.get("namespace") or namespace
            if sa_namespace and user.name == f"system:serviceaccount:{sa_namespace}:{name}":
                return subject
    return None


def _role_rules(store: Store, ref: Obj, namespace: str) -> tuple[list[Rule], str]:
    kind, name = ref.get("kind"), ref.get("name", "")
    if kind == "ClusterRole":
        role = store.get("clusterroles", None, name)
    elif kind == "Role":
        role = store.get("roles", namespace, name) if namespace else None
    else:
        return [], f'unsupported role reference kind: "{kind}"'
    if role is None:
        return [], f'{str(kind).lower()}.{RBAC_GROUP} "{name}" not found'
    return list(role.get("rules") or []), ""


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message, or `[a, b]` without repeats."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def rule_allows(info: RequestInfo, rule: Rule) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and info.verb not in verbs:
        return False
    if not info.resource_request:
        return any(url == "*" or url == info.path or (url.endswith("*") and info.path.startswith(url.rstrip("*")))
                   for url in rule.get("nonResourceURLs") or [])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and info.api_group not in groups:
        return False
    names = rule.get("resourceNames") or []
    return _resource_matches(rule.get("resources") or [], info) and (not names or info.name in names)


def _resource_matches(resources: list[str], info: RequestInfo) -> bool:
    combined = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    for resource in resources:
        if resource in ("*", combined):
            return True
        if info.subresource and resource == f"*/{info.subresource}":
            return True
    return False


def forbidden(user: User, info: RequestInfo, reason: str) -> ApiError:
    """The 403 of responsewriters.Forbidden: who cannot do what, where; the Status names the resource."""
    if not info.resource_request:
        why = f'User "{user.name}" cannot {info.verb} path "{info.path}"'
    else:
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        where = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        why = f'User "{user.name}" cannot {info.verb} resource "{resource}" in API group "{info.api_group}" {where}'
    if reason:
        why = f"{why}: {reason}"
    qualified = f"{info.resource}.{info.api_group}" if info.api_group else info.resource
    if not qualified:
        message = f"forbidden: {why}"
    elif not info.name:
        message = f"{qualified} is forbidden: {why}"
    else:
        message = f'{qualified} "{info.name}" is forbidden: {why}'
    details = {k: v for k, v in (("name", info.name), ("group", info.api_group), ("kind", info.resource)) if v}
    return ApiError(403, "Forbidden", message, details, keep_empty_details=True)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def self_review(store: Store, user: User | None, review: Any) -> Obj:
    """A SelfSubjectAccessReview (what `kubectl auth can-i` asks): the request's own user (the impersonated one
    under `--as`) against the attributes in its spec; without RBAC every request is allowed."""
    spec, info = _review_attributes(review, "SelfSubjectAccessReview")
    allowed, reason = authorize(store, user, info) if user is not None else (True, "")
    return _review_answer("SelfSubjectAccessReview", spec, allowed, reason)


def subject_review(store: Store, rbac_on: bool, review: Any) -> Obj:
    """A SubjectAccessReview: the user and groups named in its spec, taken as given (no group is added),
    against its attributes; ValidateSubjectAccessReviewSpec refuses a spec naming neither user nor group."""
    spec, info = _review_attributes(review, "SubjectAccessReview")
    user, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or []]
    if not user and not groups:
        raise _invalid_review("SubjectAccessReview", FieldError("spec.user", "Invalid value",
                                                                "at least one of user or group must be specified", ""))
    allowed, reason = authorize(store, User(user, tuple(groups)), info) if rbac_on else (True, "")
    return _review_answer("SubjectAccessReview", spec, allowed, reason)


def _review_attributes(review: Any, kind: str) -> tuple[Obj, RequestInfo]:
    """The spec and the request it asks about (ValidateSelfSubjectAccessReviewSpec: exactly one of
    resourceAttributes or nonResourceAttributes)."""
    spec = (review or {}).get("spec") if isinstance(review, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource and non_resource:
        raise _invalid_review(kind, FieldError("spec.nonResourceAttributes", "Invalid value",
                                               "cannot be specified in combination with resourceAttributes",
                                               non_resource))
    if not resource and not non_resource:
        raise _invalid_review(kind, FieldError("spec.resourceAttributes", "Invalid value",
                                               "exactly one of nonResourceAttributes or resourceAttributes must be "
                                               "specified", "null"))
    if resource:
        a = resource
        return spec, RequestInfo(path="", verb=a.get("verb", ""), resource_request=True, api_group=a.get("group", ""),
                                 api_version=a.get("version", ""), namespace=a.get("namespace", ""),
                                 resource=a.get("resource", ""), subresource=a.get("subresource", ""),
                                 name=a.get("name", ""))
    attrs: Obj = non_resource if isinstance(non_resource, dict) else {}
    return spec, RequestInfo(path=attrs.get("path", ""), verb=attrs.get("verb", ""))


def _invalid_review(kind: str, error: FieldError) -> ApiError:
    plural = kind.lower() + "s"
    return invalid(Resource("authorization.k8s.io", "v1", kind, plural, False), "", [error])


def _review_answer(kind: str, spec: Obj, allowed: bool, reason: str) -> Obj:
    status: Obj = {"allowed": allowed, **({"reason": reason} if reason else {})}
    return {"kind": kind, "apiVersion": "authorization.k8s.io/v1", "metadata": {"creationTimestamp": None},
            "spec": spec, "status": status}


# -- the bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy) -------------------------

_BOOTSTRAP_META = {"labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                   "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}
_ROLES: tuple[tuple[str, list[Rule]], ...] = (
    ("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                       {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
    ("system:discovery", [{"nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi",
                                               "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"],
                           "verbs": ["get"]}]),
    ("system:basic-user", [{"apiGroups": ["authorization.k8s.io"],
                            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                            "verbs": ["create"]}]),
    ("system:public-info-viewer", [{"nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/"],
                                    "verbs": ["get"]}]),
)
_BINDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cluster-admin", (MASTERS,)),
    ("system:discovery", (AUTHENTICATED,)),
    ("system:basic-user", (AUTHENTICATED,)),
    ("system:public-info-viewer", (AUTHENTICATED, UNAUTHENTICATED)),
)


def bootstrap_policy() -> list[Obj]:
    """The default ClusterRoles and ClusterRoleBindings every cluster with RBAC starts with."""
    api_version = f"{RBAC_GROUP}/v1"
    out: list[Obj] = [{"apiVersion": api_version, "kind": "ClusterRole",
                       "metadata": {"name": name, **_BOOTSTRAP_META}, "rules": rules} for name, rules in _ROLES]
    for name, groups in _BINDINGS:
        out.append({"apiVersion": api_version, "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, **_BOOTSTRAP_META},
                    "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                    "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]})
    return out
