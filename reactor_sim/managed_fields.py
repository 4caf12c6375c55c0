"""`metadata.managedFields` as the API server writes them on create and update (server-side field tracking).

Upstream: k8s.io/apiserver/pkg/endpoints/handlers (create.go, update.go, patch.go) run every non-apply write through
the field manager (k8s.io/apimachinery/pkg/util/managedfields, `internal.NewFieldManager` with the
`managedFieldsUpdater`, `stripMetaManager` and `versionCheckManager` decorators):

- the manager is the `fieldManager` query parameter, else the User-Agent up to its first "/" (rest.go
  `managerOrUserAgent` / `prefixFromUserAgent`), at most 128 characters;
- a write records an entry {manager, operation: "Update", apiVersion, time, fieldsType: "FieldsV1", fieldsV1}, plus
  `subresource: "status"` for a status write (internal/managedfieldsupdater.go, internal/structuredmerge.go);
- the fields an Update owns are those it set on create, or changed on update; another manager loses the fields
  the write changed (internal/fieldmanager.go `Update`: conflicts are resolved in favour of the updater);
- `apiVersion`, `kind`, metadata `name`, `namespace`, `uid`, `resourceVersion`, `generation`,
  `creationTimestamp`, `selfLink` and `managedFields` are never listed (internal/stripmeta.go);
- a resource with a status subresource: the main resource's writes do not own `status`, a status write owns only
  `status` (the registry's `GetResetFields`);
- the entry's time is the write's, to the second (metav1.Time), and changes only when the manager's fields do.

FieldsV1 is sigs.k8s.io/structured-merge-diff's set serialisation: `f:<field>` for a field, `k:{...}` for an item
of a list keyed by `name` (containers, env, ports...), `.` for a map or list item that is itself owned. Without
the OpenAPI schema this module cannot tell an atomic struct from a granular one: every map is granular and every
list of named maps is keyed, every other list atomic — the shape and size of the real entries, not each
schema's exceptions (`selector`, atomic in the schema, is listed granularly here).
"""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]
UPDATE = "Update"
MAX_MANAGER = 128
_STRIPPED = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                       "selfLink", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds"})
_MAPS = frozenset({"labels", "annotations", "matchLabels", "limits", "requests", "nodeSelector", "data", "hard",
                   "used", "capacity", "allocatable"})  # map[string]X: the map itself is listed with "."


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """rest.go `managerOrUserAgent`: the fieldManager parameter, else the User-Agent's prefix before "/"."""
    if field_manager:
        return field_manager
    return (user_agent or "").split("/", 1)[0][:MAX_MANAGER]


def fields_of(obj: Obj, *, subresource: str = "", has_status: bool = False) -> Obj:
    """The FieldsV1 set of every field `obj` sets (what a create by one manager owns)."""
    return _unpaths(_owned_leaves(obj, subresource, has_status))


def _owned_leaves(obj: Obj, subresource: str, has_status: bool) -> dict[tuple[str, ...], Any]:
    """Each owned leaf's path (FieldsV1 keys) and value: what a write changed is where the values differ."""
    if subresource == "status":
        return _leaves(obj.get("status"), "status", ("f:status",)) if obj.get("status") else {}
    out: dict[tuple[str, ...], Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and has_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            for k, v in value.items():
                if k not in _STRIPPED:
                    out.update(_leaves(v, k, ("f:metadata", f"f:{k}")))
            continue
        out.update(_leaves(value, key, (f"f:{key}",)))
    return out


def record_create(obj: Obj, manager: str, now: str, *, has_status: bool = False) -> None:
    """The entry a create writes (replacing any the client sent: create.go resets them for a new object)."""
    fields = fields_of(obj, has_status=has_status)
    obj["metadata"]["managedFields"] = [_entry(manager, obj, now, fields)] if fields and manager else []


def record_update(old: Obj, new: Obj, manager: str, now: str, *, subresource: str = "",
                  has_status: bool = False) -> None:
    """`new`'s managedFields after `manager` wrote it over `old`: the changed fields move to its entry."""
    entries = [dict(e) for e in (old.get("metadata") or {}).get("managedFields") or [] if isinstance(e, dict)]
    before = _owned_leaves(old, subresource, has_status)
    after = _owned_leaves(new, subresource, has_status)
    changed = {p for p in after if p not in before or before[p] != after[p]}
    gone = set(before) - set(after)
    kept: list[Obj] = []
    mine: Obj | None = None
    for entry in entries:
        owned = set(_paths(entry.get("fieldsV1") or {}))
        if entry.get("manager") == manager and entry.get("operation") == UPDATE \
                and entry.get("subresource", "") == subresource:
            mine = entry
            continue
        left = owned - changed - gone
        if left != owned:
            entry["fieldsV1"] = _unpaths(dict.fromkeys(left))
        if left:
            kept.append(entry)
    previous = set(_paths(mine.get("fieldsV1") or {})) if mine is not None else set()
    owned_now = (previous - gone) | changed
    if owned_now and manager:
        time = mine["time"] if mine is not None and owned_now == previous and not changed else now
        entry = _entry(manager, new, time, _unpaths(dict.fromkeys(owned_now)))
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    new.setdefault("metadata", {})["managedFields"] = kept


def _entry(manager: str, obj: Obj, time: str, fields: Obj) -> Obj:
    return {"manager": manager, "operation": UPDATE, "apiVersion": str(obj.get("apiVersion", "")), "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": fields}


def _leaves(value: Any, name: str, prefix: tuple[str, ...]) -> dict[tuple[str, ...], Any]:
    if isinstance(value, dict) and value:
        out: dict[tuple[str, ...], Any] = {(*prefix, "."): None} if name in _MAPS else {}
        for k, v in value.items():
            out.update(_leaves(v, k, (*prefix, f"f:{k}")))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        out = {}
        for item in value:
            key = (*prefix, "k:" + json.dumps({"name": item["name"]}, separators=(",", ":")))
            out[(*key, ".")] = None
            for k, v in item.items():
                out.update(_leaves(v, k, (*key, f"f:{k}")))
        return out
    return {prefix: value}


def _paths(fields: Obj, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Obj]:
    """Every leaf of a FieldsV1 set, by path."""
    out: dict[tuple[str, ...], Obj] = {}
    for key, value in fields.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            out.update(_paths(value, path))
        else:
            out[path] = {}
    return out


def _unpaths(paths: dict[tuple[str, ...], Any]) -> Obj:
    out: Obj = {}
    for path in sorted(paths):
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node.setdefault(path[-1], {})
    return out
