"""Which owner links the reactor believes: only those the Kubernetes controllers themselves build.

A tenant who can create pods can write any ownerReference on them, so a reference alone proves
nothing. A link child → owner is accepted only when (1) it is a controller reference of a kind
pair a controller creates (Pod → ReplicaSet → Deployment, Pod → StatefulSet, Pod → Job → CronJob),
(2) its uid is the fetched owner's metadata.uid (not merely its name), and (3) the owner's selector
matches the child's labels, as the controller's own adoption check does (a Deployment's selector is
checked against its ReplicaSet's template labels). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# (child kind, owner kind) pairs that a built-in controller creates.
LINKS = frozenset({
    ("Pod", "ReplicaSet"), ("ReplicaSet", "Deployment"), ("Pod", "StatefulSet"), ("Pod", "Job"), ("Job", "CronJob"),
})
_SELECTED = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job"})  # CronJobs have no selector


@dataclass(frozen=True, slots=True)
class ControllerRef:
    """The controller ownerReference of an object, as written on it (untrusted)."""

    kind: str
    name: str
    uid: str
    api_version: str = ""  # e.g. "serving.knative.dev/v1": a kind is told apart from its namesakes by group

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def controller_ref(obj: Mapping[str, Any]) -> ControllerRef | None:
    """The object's controlling owner reference, if any (the first with `controller: true`)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ControllerRef(str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", "")),
                                 str(ref.get("apiVersion", "")))
    return None


def link_failure(child_kind: str, child: Mapping[str, Any], ref: ControllerRef, owner: Mapping[str, Any]) -> str | None:
    """Why `owner` (fetched by `ref`'s name) is not `child`'s controller; None when the link holds."""
    if (child_kind, ref.kind) not in LINKS:
        return f"{child_kind} → {ref.kind} is not a link a Kubernetes controller creates"
    uid = (owner.get("metadata") or {}).get("uid")
    if not uid or uid != ref.uid:
        return f"the ownerReference's uid {ref.uid!r} is not {ref.kind} {ref.name}'s uid"
    if ref.kind not in _SELECTED:
        return None
    labels = _labels(child_kind, child)
    selector = (owner.get("spec") or {}).get("selector")
    if not isinstance(selector, Mapping) or not selector:
        return f"{ref.kind} {ref.name} has no selector"
    if not selector_matches(selector, labels):
        return f"{ref.kind} {ref.name}'s selector does not match the {child_kind}'s labels"
    return None


def _labels(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ReplicaSet is matched by its pod template's labels (what its pods carry); others by their own."""
    if kind == "ReplicaSet":
        template = (obj.get("spec") or {}).get("template") or {}
        return (template.get("metadata") or {}).get("labels") or {}
    return (obj.get("metadata") or {}).get("labels") or {}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """metav1.LabelSelector semantics: every matchLabels pair and every matchExpression must hold.

    An operator this function does not know, or a malformed expression, matches nothing: an owner
    the reactor cannot check is not believed.
    """
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(_expression_holds(e, labels) for e in expressions)


def _expression_holds(expression: Any, labels: Mapping[str, Any]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False
