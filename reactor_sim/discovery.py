"""Discovery documents (`/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`).

Built from the registry only; these are what kubectl reads to map `deploy` to a URL.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.registry import Registry, Resource

Obj = dict[str, Any]

def version_info(registry: Registry) -> Obj:
    """`/version`: the release the cluster plays (versions.KubeVersion)."""
    return registry.version.version_info()


def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list(registry: Registry) -> Obj:
    groups = []
    for group, versions in registry.groups().items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    for g in api_group_list(registry)["groups"]:
        if g["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **g}
    return None


def _entry(res: Resource) -> list[Obj]:
    out: list[Obj] = [{"name": res.plural, "singularName": res.kind.lower(), "namespaced": res.namespaced,
                       "kind": res.kind, "verbs": list(res.verbs)}]
    if res.short_names:
        out[0]["shortNames"] = list(res.short_names)
    if res.categories:
        out[0]["categories"] = list(res.categories)
    for sub in res.subresources:
        entry: Obj = {"name": f"{res.plural}/{sub}", "singularName": "", "namespaced": res.namespaced,
                      "kind": res.kind, "verbs": ["get", "patch", "update"]}
        if sub == "scale":
            entry.update(group="autoscaling", version="v1", kind="Scale")
        if sub == "token":
            entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"])
        out.append(entry)
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    resources = [e for r in registry.resources if r.serves(group, version) for e in _entry(r)]
    if not resources:
        return None
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
