"""The three patch types the API server accepts, as pure functions on JSON values.

Strategic merge patch knows the merge keys of the Kubernetes types the reactor touches; JSON merge
patch follows RFC 7386 (lists replaced whole); JSON patch follows RFC 6902. No I/O, no store access.
"""

from __future__ import annotations

import copy
from typing import Any

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# Field name -> merge key, as the Go struct tags `patchMergeKey` give them for core/apps types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": "containerPort", "imagePullSecrets": "name", "ownerReferences": "uid",
    "conditions": "type", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name", "schedulingGates": "name", "containerStatuses": "name",
}
# Lists of scalars merged as sets (patchStrategy "merge" on a primitive list).
SET_LISTS = frozenset({"finalizers"})


class PatchError(ValueError):
    """The patch could not be applied (bad document, missing path, failed `test`)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """Strategic merge patch: like merge patch, but known lists merge by their key."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            out[key] = _merge_list(out.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in SET_LISTS:
            current = list(out.get(key) or [])
            out[key] = current + [v for v in value if v not in current]
        else:
            out[key] = strategic_merge(out.get(key), value)
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    out = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        index = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(strategic_merge({}, item))
        else:
            out[index] = strategic_merge(out[index], item)
    return out


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 with add/remove/replace/move/copy/test; any failure raises PatchError."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        doc = _apply_op(doc, op)
    return doc


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op["op"], op["path"]
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise PatchError(f"testing value {path} failed: test failed")
        return doc
    if kind == "remove":
        return _remove(doc, path)
    if kind in ("add", "replace"):
        if "value" not in op:
            raise PatchError(f"missing value for {kind} {path}")
        if kind == "replace":
            _get(doc, path)
            doc = _remove(doc, path)
        return _add(doc, path, copy.deepcopy(op["value"]))
    if kind in ("move", "copy"):
        value = copy.deepcopy(_get(doc, op.get("from", "")))
        if kind == "move":
            doc = _remove(doc, op["from"])
        return _add(doc, path, value)
    raise PatchError(f"unexpected operation {kind!r}")


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid path {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"doc is missing path: {path}")
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise PatchError(f"doc is missing path: {path}")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _child(node, token, path)
    return node


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError("cannot address the document root")
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token, path)
    return node, tokens[-1]


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"add operation index out of bounds: {path}")
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parent, last = _parent(doc, path)
    _child(parent, last, path)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return doc


def apply(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Dispatch on the patch media type; unknown types raise KeyError."""
    base = content_type.split(";")[0].strip()
    if base == STRATEGIC:
        if not isinstance(patch, dict):
            raise PatchError("strategic merge patch must be a JSON object")
        return strategic_merge(target, patch)
    if base == MERGE:
        return merge_patch(target, patch)
    if base == JSON_PATCH:
        return json_patch(target, patch)
    raise KeyError(base)
