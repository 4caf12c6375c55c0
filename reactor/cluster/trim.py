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

from typing import Any

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
