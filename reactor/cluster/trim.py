"""The transform every object passes before it enters the watch cache: only what the reactor reads is kept.

client-go informers do the same with `SharedIndexInformer.SetTransform` (k8s.io/client-go/tools/cache/
shared_informer.go, `TransformFunc`; the documented example drops `managedFields`): the cache holds what the
controller reads, not what the API server sends. A ReplicaSet from a real v1.28 API server is ~3.5 KB of JSON,
half of it `managedFields`; what the reactor reads of it is a few hundred bytes.

What each kind keeps, and who reads it (change this table with the readers):
- every kind: `metadata` less `managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
  annotation (a copy of the whole manifest). `apiVersion` and `kind` stay (messages name the kind).
- Deployment, StatefulSet, CronJob (the workloads the policy decides on): `spec` whole (the template's
  containers, priority, replicas: reactor/cluster/workloads.py, compute.py) and `status` whole (the rollout:
  reactor/cluster/rollout.py; an operator's child: integrations/adapters/status.py `child_rollout`).
- ReplicaSet: the ownership checks only (reactor/core/ownership.py `link_failure`): `spec.selector` (a pod's
  labels must match it, as the ReplicaSet controller's `ClaimPods` does) and `spec.template.metadata` (its
  labels must match the Deployment's selector). The pod template's `spec` and the `status` are never read.
- Job: the same ownership fields, and `status` (a JobSet's child Job is read for its rollout); the pod
  template's `spec` is never read (a Job is never patched; its template is immutable).
- HorizontalPodAutoscaler: `spec` (`scaleTargetRef`, cluster/workloads.py `hpa_targets`); `status` is never read.
- LimitRange, ResourceQuota, PriorityClass: kept whole but for the metadata (small, and every field is read:
  limits, hard/used, value/globalDefault).

Pure: a new dict; the argument is not changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Kinds whose pod template's spec is never read: only the template's metadata (its labels) is kept.
_TEMPLATE_LABELS_ONLY = frozenset({"ReplicaSet", "Job"})
# Kinds whose status is never read.
_NO_STATUS = frozenset({"ReplicaSet", "HorizontalPodAutoscaler"})


def trimmed(kind: str, obj: Obj) -> Obj:
    """`obj` as the watch cache keeps it (see the module docstring for what each kind keeps and why)."""
    out = {k: v for k, v in obj.items() if not (k == "status" and kind in _NO_STATUS)}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = trimmed_metadata(meta)
    spec = obj.get("spec")
    if kind in _TEMPLATE_LABELS_ONLY and isinstance(spec, dict):
        template = spec.get("template")
        out["spec"] = {**spec, "template": _template_metadata(template)} if isinstance(template, dict) else spec
    return out


def trimmed_metadata(meta: Obj) -> Obj:
    """`metadata` less `managedFields` and the last-applied annotation."""
    kept = {k: v for k, v in meta.items() if k != "managedFields"}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        kept["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return kept


def _template_metadata(template: Obj) -> Obj:
    meta = template.get("metadata")
    return {"metadata": trimmed_metadata(meta)} if isinstance(meta, dict) else {}


# --- a list page, trimmed as it is decoded -------------------------------------------------------------------------
#
# A list page of 500 ReplicaSets is ~2 MB of JSON, and `json.loads` builds every dict and str of it — managedFields,
# the last-applied copy, the pod template's spec — only for `trimmed` to drop most of it: at 100,000 objects that was
# 31 s of a 70 s start. Here msgspec decodes each object's top level and metadata as spans of the page's bytes
# (`Raw`: found, never built into objects), drops what `trimmed` drops, and writes the kept spans back as the
# object's cached text: the same object `trimmed` keeps (tests/cluster/test_cache_trim.py holds the two equal), in a
# few ms a page. A page msgspec cannot read so (not a list of objects) is decoded the ordinary way and trimmed.

_Fields = dict[str, msgspec.Raw]


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword: the field is renamed.
    token: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[_Fields] | None = None


@dataclass(frozen=True, slots=True)
class Encoded:
    """One object of a list page as the watch cache keeps it: where it lives, and its trimmed JSON text."""

    namespace: str
    name: str
    text: bytes


_page = msgspec.json.Decoder(_Page)
_fields = msgspec.json.Decoder(_Fields)
_text = msgspec.json.Decoder(str)
_encode_raw = msgspec.json.Encoder().encode
_LAST_APPLIED_BYTES = LAST_APPLIED.encode()


def decode_page(kind: str, data: bytes) -> Obj:
    """A list answer's bytes as the gateway's list returns it (`metadata`, `items`), its items already trimmed and
    encoded (`Encoded`) for the store."""
    try:
        page = _page.decode(data)
        items = [_encoded_item(kind, fields) for fields in page.items or []]
    except (msgspec.DecodeError, KeyError):
        plain: Obj = json.loads(data)
        plain["items"] = [Encoded(*_where(o), _dumps(trimmed(kind, o))) for o in plain.get("items") or []]
        return plain
    return {"metadata": {"resourceVersion": page.metadata.resourceVersion, "continue": page.metadata.token},
            "items": items}


def _encoded_item(kind: str, fields: _Fields) -> Encoded:
    kept: dict[str, Any] = dict(fields)
    if kind in _NO_STATUS:
        kept.pop("status", None)
    meta = kept.get("metadata")
    if meta is not None:
        meta_fields = _trimmed_metadata_fields(meta)
        kept["metadata"] = meta_fields
        namespace = _text.decode(meta_fields["namespace"]) if "namespace" in meta_fields else ""
        name = _text.decode(meta_fields["name"]) if "name" in meta_fields else ""
    else:
        namespace = name = ""
    spec = kept.get("spec")
    if kind in _TEMPLATE_LABELS_ONLY and spec is not None:
        spec_fields: dict[str, Any] = dict(_fields.decode(spec))
        template = spec_fields.get("template")
        if template is not None:
            template_meta = _fields.decode(template).get("metadata")
            spec_fields["template"] = {} if template_meta is None else {
                "metadata": _trimmed_metadata_fields(template_meta)}
        kept["spec"] = spec_fields
    # The kept spans are the server's bytes: compacted, so an API server that writes spaces after its separators
    # (Python's json does; Go's encoding/json does not) costs the cache nothing more.
    return Encoded(namespace, name, msgspec.json.format(_encode_raw(kept), indent=-1))


def _trimmed_metadata_fields(meta: msgspec.Raw) -> dict[str, Any]:
    fields: dict[str, Any] = dict(_fields.decode(meta))
    fields.pop("managedFields", None)
    annotations = fields.get("annotations")
    if annotations is not None and _LAST_APPLIED_BYTES in bytes(annotations):
        kept = dict(_fields.decode(annotations))
        kept.pop(LAST_APPLIED, None)
        fields["annotations"] = kept
    return fields


def _where(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _dumps(obj: Obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
