"""The resource table: which group/version/kind/plural the simulated API server serves.

It holds metadata only: it stores no objects and knows nothing about HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from reactor_sim.versions import DEFAULT, KubeVersion

RBAC_GROUP = "rbac.authorization.k8s.io"
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    other_versions: tuple[str, ...] = ()
    verbs: tuple[str, ...] = VERBS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`deployments.apps`, or `pods` for the core group, as in upstream messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """`Deployment.apps`, or `Pod`, as in upstream 422 messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def serves(self, group: str, version: str) -> bool:
        return group == self.group and (version == self.version or version in self.other_versions)


def _r(group: str, version: str, kind: str, plural: str, namespaced: bool = True, **kw: object) -> Resource:
    return Resource(group, version, kind, plural, namespaced, **kw)  # type: ignore[arg-type]


BUILTIN: tuple[Resource, ...] = (
    _r("", "v1", "Namespace", "namespaces", False, short_names=("ns",), subresources=("status",)),
    _r("", "v1", "Pod", "pods", short_names=("po",), subresources=("status", "resize"), categories=("all",)),
    _r("", "v1", "Event", "events", short_names=("ev",)),
    _r("", "v1", "LimitRange", "limitranges", short_names=("limits",)),
    _r("", "v1", "ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    _r("", "v1", "Node", "nodes", False, short_names=("no",), subresources=("status",)),
    _r("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    _r("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",), subresources=("token",)),
    _r("", "v1", "Secret", "secrets"),
    _r("", "v1", "Service", "services", short_names=("svc",), subresources=("status",), categories=("all",)),
    _r("apps", "v1", "Deployment", "deployments", short_names=("deploy",),
       subresources=("status", "scale"), categories=("all",)),
    _r("apps", "v1", "ReplicaSet", "replicasets", short_names=("rs",),
       subresources=("status", "scale"), categories=("all",)),
    _r("apps", "v1", "StatefulSet", "statefulsets", short_names=("sts",),
       subresources=("status", "scale"), categories=("all",)),
    _r("batch", "v1", "Job", "jobs", subresources=("status",), categories=("all",)),
    _r("batch", "v1", "CronJob", "cronjobs", short_names=("cj",), subresources=("status",), categories=("all",)),
    _r("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", short_names=("hpa",),
       subresources=("status",), categories=("all",), other_versions=("v1",)),
    _r("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)),
    _r("coordination.k8s.io", "v1", "Lease", "leases"),
    _r("events.k8s.io", "v1", "Event", "events", short_names=("ev",)),
    _r("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",), subresources=("status",)),
    _r("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short_names=("netpol",)),
    _r("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
       short_names=("crd", "crds"), subresources=("status",)),
    _r(RBAC_GROUP, "v1", "Role", "roles"),
    _r("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False, verbs=("create",)),
    _r("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False, verbs=("create",)),
    _r(RBAC_GROUP, "v1", "RoleBinding", "rolebindings"),
    _r(RBAC_GROUP, "v1", "ClusterRole", "clusterroles", False),
    _r(RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
)


def _guess_plural(kind: str) -> str:
    low = kind.lower()
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return low[:-1] + "ies"
    if low.endswith(("s", "x", "ch", "sh")):
        return low + "es"
    return low + "s"


def builtin(version: KubeVersion = DEFAULT) -> list[Resource]:
    """The built-in resources `version` serves: pods/resize from v1.33 only (see versions.py)."""
    return [replace(r, subresources=tuple(s for s in r.subresources if s != "resize"))
            if r.plural == "pods" and not version.serves_resize else r for r in BUILTIN]


@dataclass
class Registry:
    """The resources one simulated cluster serves; generic kinds can be added at run time."""

    version: KubeVersion = DEFAULT  # the release played: what /version says and which subresources exist
    resources: list[Resource] = field(default_factory=list)
    # (group, version, kind) -> openAPIV3Schema of a CRD's version; a custom resource is one with an entry.
    schemas: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # (group, version, kind) -> a CRD version's additionalPrinterColumns (tables.py builds kubectl's Table from them)
    printer_columns: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = builtin(self.version)

    def by_path(self, group: str, version: str, plural: str) -> Resource | None:
        for res in self.resources:
            if res.plural == plural and res.serves(group, version):
                return res
        return None

    def by_plural(self, plural: str) -> Resource:
        """The preferred resource for a plural (core before events.k8s.io)."""
        for res in self.resources:
            if res.plural == plural or res.qualified == plural:
                return res
        raise KeyError(f"unknown resource {plural!r}")

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        group, _, version = api_version.rpartition("/")
        for res in self.resources:
            if res.kind == kind and res.serves(group, version):
                return res
        return None

    def add_generic(self, api_version: str, kind: str, *, namespaced: bool) -> Resource:
        """Register an unknown kind so it can be stored and served as plain JSON."""
        group, _, version = api_version.rpartition("/")
        if not version or not kind:
            raise ValueError(f"cannot store an object without apiVersion and kind: {api_version!r} {kind!r}")
        res = Resource(group, version, kind, _guess_plural(kind), namespaced)
        self.resources.append(res)
        return res

    def add_crd(self, crd: dict[str, Any]) -> Resource:
        """Serve the resource a CustomResourceDefinition defines (its served versions, storage first),
        replacing a generic entry guessed for the same group and kind."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
        versions.sort(key=lambda v: not v.get("storage"))
        if not versions or not names.get("kind") or not names.get("plural"):
            raise ValueError(f"CustomResourceDefinition {crd.get('metadata', {}).get('name')} needs names and versions")
        subresources = tuple(k for k in ("status", "scale") if k in (versions[0].get("subresources") or {}))
        res = Resource(spec.get("group", ""), versions[0]["name"], names["kind"], names["plural"],
                       spec.get("scope") == "Namespaced", short_names=tuple(names.get("shortNames") or ()),
                       subresources=subresources, categories=tuple(names.get("categories") or ()),
                       other_versions=tuple(v["name"] for v in versions[1:]))
        self.resources = [r for r in self.resources if not (r.group == res.group and r.kind == res.kind)] + [res]
        for v in versions:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            self.schemas[(res.group, v["name"], res.kind)] = schema if isinstance(schema, dict) else {}
            columns = v.get("additionalPrinterColumns")
            self.printer_columns[(res.group, v["name"], res.kind)] = columns if isinstance(columns, list) else []
        return res

    def schema_of(self, res: Resource, api_version: str = "") -> dict[str, Any] | None:
        """The CRD schema a custom object of `res` is checked against; None for built-in resources."""
        version = api_version.rpartition("/")[2] or res.version
        return self.schemas.get((res.group, version, res.kind), self.schemas.get((res.group, res.version, res.kind)))

    def groups(self) -> dict[str, list[str]]:
        """group -> versions, in table order; the core group is ''."""
        out: dict[str, list[str]] = {}
        for res in self.resources:
            versions = out.setdefault(res.group, [])
            for v in (res.version, *res.other_versions):
                if v not in versions:
                    versions.append(v)
        return out
