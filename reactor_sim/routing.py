"""URL shapes of kube-apiserver, parsed into (resource, namespace, name, subresource).

Pure parsing against the registry; no HTTP and no store.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor_sim.registry import Registry, Resource


@dataclass(frozen=True, slots=True)
class Route:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str


def split_prefix(path: str) -> tuple[str, str, list[str]] | None:
    """`/api/v1/...` -> ('', 'v1', rest); `/apis/apps/v1/...` -> ('apps', 'v1', rest)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def parse(registry: Registry, path: str) -> Route | None:
    prefix = split_prefix(path)
    if prefix is None:
        return None
    group, version, rest = prefix
    if not rest or len(rest) > 5:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        res = registry.by_path(group, version, rest[2])
        if res is not None and res.namespaced:
            return _route(res, rest[1], rest[3:])
    res = registry.by_path(group, version, rest[0])
    if res is None or len(rest) > 3:
        return None
    return _route(res, None, rest[1:])


def _route(res: Resource, namespace: str | None, rest: list[str]) -> Route | None:
    name = rest[0] if rest else None
    sub = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2 or (sub and sub not in res.subresources):
        return None
    return Route(res, namespace, name, sub)


# Subresources of a namespace itself (`/api/v1/namespaces/NAME/status`), not resources inside it.
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What authorization sees of a request (upstream's RequestInfo), parsed from the URL alone.

    It does not consult the registry: a request for a resource that does not exist is authorized
    (and refused) like any other before the server finds it is a 404.
    """

    path: str
    verb: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def request_info(method: str, path: str, query: dict[str, str]) -> RequestInfo:
    """RequestInfoFactory.NewRequestInfo for the `/api` and `/apis` prefixes."""
    parts = [p for p in path.strip("/").split("/") if p]
    plain = RequestInfo(path=path, verb=method.lower())
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return plain
    group = parts[1] if parts[0] == "apis" else ""
    rest = parts[2:] if parts[0] == "apis" else parts[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method, "")
    if rest and rest[0] == "watch" and len(rest) > 1:
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if "watch" in query and query["watch"].lower() not in ("false", "0") else "list"
    if not name and verb in ("list", "watch"):
        name = _selected_name(query.get("fieldSelector"))
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(path=path, verb=verb, resource_request=True, api_group=group, api_version=version,
                       namespace=namespace, resource=resource, subresource=subresource, name=name)


def _selected_name(field_selector: str | None) -> str:
    """A list or watch of one object by `fieldSelector=metadata.name=X` is authorized as that name."""
    terms = [t.strip() for t in (field_selector or "").split(",") if t.strip()]
    if len(terms) != 1:
        return ""
    key, sep, value = terms[0].partition("==") if "==" in terms[0] else terms[0].partition("=")
    return value.strip() if sep and key.strip() == "metadata.name" and "!" not in key else ""
