"""Which links to an operator's resource the reactor believes: those the operator itself builds.

As for the built-in controllers (see ownership.py), an ownerReference is written by whoever
creates the child, so a link child → custom resource holds only when (1) the child is of a kind
the operator creates, (2) the reference's uid is the fetched resource's uid, and (3) the child
carries the label the operator puts on what it creates (the resources have no selector to check
instead), and (4) the owner's side agrees: the operator names the child after the resource or records it
(`Adapter.names_child`, adapters/naming.py). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.integrations.adapters.base import Adapter


def adapted_link_failure(adapter: Adapter, child_kind: str, child: Mapping[str, Any], ref_name: str, ref_uid: str,
                         owner: Mapping[str, Any]) -> str | None:
    """Why `owner` is not `child`'s operator resource; None when the link holds."""
    if child_kind not in adapter.children:
        return f"{child_kind} → {adapter.kind} is not a link the {adapter.kind} operator creates"
    uid = (owner.get("metadata") or {}).get("uid")
    if not uid or uid != ref_uid:
        return f"the ownerReference's uid {ref_uid!r} is not {adapter.kind} {ref_name}'s uid"
    labels = (child.get("metadata") or {}).get("labels") or {}
    if adapter.owner_label and labels.get(adapter.owner_label) != ref_name:
        return f"the {child_kind} lacks the label {adapter.owner_label}={ref_name} the operator sets"
    for key, value in adapter.child_labels:
        if labels.get(key) != value:
            return f"the {child_kind} lacks the label {key}={value} the operator sets"
    return adapter.names_child(owner, child_kind, child)  # the owner's side: the name it gives it, or its record


def hop_failure(adapter: Adapter, child_kind: str, child: Mapping[str, Any], ref_name: str, ref_uid: str,
                owner: Mapping[str, Any]) -> str | None:
    """Why `owner` is not the intermediate controller the operator makes of `child` (e.g. a LeaderWorkerSet's
    leader pod over its group's worker StatefulSet): the uid must match and both carry the same owner label."""
    uid = (owner.get("metadata") or {}).get("uid")
    if not uid or uid != ref_uid:
        return f"the ownerReference's uid {ref_uid!r} is not {owner.get('kind', '')} {ref_name}'s uid"
    mine = ((child.get("metadata") or {}).get("labels") or {}).get(adapter.owner_label)
    theirs = ((owner.get("metadata") or {}).get("labels") or {}).get(adapter.owner_label)
    if not mine or mine != theirs:
        return f"{child_kind} and its owner {ref_name} do not carry the same {adapter.owner_label} label"
    return adapter.names_hop(owner, child_kind, child)
