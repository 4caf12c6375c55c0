"""URL shapes of kube-apiserver, parsed into (resource, namespace, name, subresource).

Pure parsing against the registry; no HTTP and no store.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Registry, Resource


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
