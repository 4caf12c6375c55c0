"""Owner references, pod readiness and template hashes: the small facts every controller needs.

Pure functions on object dicts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

Obj = dict[str, Any]
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def owner_ref(owner: Obj) -> Obj:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def controlled_by(obj: Obj, owner: Obj) -> bool:
    uid = owner["metadata"]["uid"]
    return any(r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def template_hash(template: Obj) -> str:
    """fnv-1a 32 of the template, spelled with upstream's SafeEncodeString alphabet."""
    h = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(HASH_ALPHABET[ord(ch) % len(HASH_ALPHABET)] for ch in str(h))


def is_active(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") \
        and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: Obj) -> bool:
    conds = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def is_available(pod: Obj, min_ready_seconds: int, now: datetime) -> bool:
    """Ready for at least minReadySeconds (podutil.IsPodAvailable)."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    cond = next(c for c in pod["status"]["conditions"] if c.get("type") == "Ready")
    since = datetime.strptime(cond.get("lastTransitionTime", ""), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return since + timedelta(seconds=min_ready_seconds) <= now


def pod_from_template(template: Obj, owner: Obj, namespace: str) -> Obj:
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": namespace, "labels": dict(tmeta.get("labels") or {}),
                 "ownerReferences": [owner_ref(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": json.loads(json.dumps(template["spec"]))}
