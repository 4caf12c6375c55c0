"""Where the reactor keeps its own state for a resource whose operator copies annotations into the pods (KServe).

KServe v0.20.0 copies an InferenceService's annotations, all but a short disallow list (pkg/constants
ServiceAnnotationDisallowedList: Knative's min/max-scale, the storage-initializer URI, kubectl's
last-applied-configuration, the model format), into the predictor's pod template (components/predictor.go
buildPredictorResources → buildObjectMeta): in raw mode a changed template rolls the Deployment, in serverless
mode it makes a new Knative Revision. The reactor's `gpu-reactor.io/*` state annotations there would restart
the model servers on every write, and the verifier's annotation-only "verified" mark once more.

So for such an adapter (`Adapter.state_apart`) the reactor's own annotations live on a Lease
(coordination.k8s.io/v1) `<resource>.gpu-reactor` in the resource's namespace, owned by the resource (an
ownerReference carrying its uid: deleted with it by the garbage collector, never a controller reference) and
read only while that uid is the resource's.

Anyone with Lease rights in the namespace (another team, in a shared one) can create that Lease before the reactor
does, edit it, or delete it. So the Lease is never an authority: only a record the reactor sealed for this
resource's uid counts (state/seal.py), and a Lease holding anything else is read as no record at all, never as a
refusal (`STATE_HOME` tells seal.authenticate the record came from here). The state ledger keeps the reactor's own
copy of its latest record (state/ledger_codec.py): an edited, replayed or deleted Lease is decided on that copy, and
the reactor's next write replaces the Lease's contents and its ownerReferences.

Why not a key KServe does not copy: the disallow list is exact keys, configurable only in KServe's own ConfigMap, so
no reactor-chosen key is safe on every install. Why a Lease and not a ConfigMap: the reactor is granted no ConfigMap
or Secret anywhere (a tenant's configuration may hold credentials); a Lease holds nothing but coordination metadata,
and only its annotations are used here. The people-facing annotations (`mode`, the bounds) stay on the resource: a
person setting one restarts the pods once, as KServe would for any annotation. The Lease is created before the
resource changes (a refused create writes nothing); the resource's spec is then written (conditional on its
resourceVersion: it holds the turn), then the state; the state alone (the verified mark) is conditional on the
Lease's resourceVersion as read.

Pure: these functions build and split objects; the Lease home (state/homes.py `OnLease`) sends them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from reactor.state.annotations import MAX_GPUS, MAX_REPLICAS, MIN_GPUS, MIN_REPLICAS, MODE, PREFIX, STATE_HOME

Obj = dict[str, Any]
SUFFIX = ".gpu-reactor"
PEOPLE_KEYS = frozenset({MODE, MIN_GPUS, MAX_GPUS, MIN_REPLICAS, MAX_REPLICAS})  # set by people, on the resource
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-reactor"}


def home_name(resource_name: str) -> str:
    return resource_name + SUFFIX


def reactor_key(key: str) -> bool:
    """A key the reactor itself writes (its state), as opposed to one people set."""
    return key.startswith(PREFIX) and key not in PEOPLE_KEYS


def split(body: Mapping[str, Any]) -> tuple[dict[str, str | None], Obj]:
    """(the reactor's own annotations in a patch body, the body without them)."""
    rest = copy.deepcopy(dict(body))
    meta = rest.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    own = {k: v for k, v in annotations.items() if reactor_key(k)}
    kept = {k: v for k, v in annotations.items() if not reactor_key(k)}
    if "annotations" in meta:
        if kept:
            meta["annotations"] = kept
        else:
            del meta["annotations"]
    return own, rest


def writes_resource(rest: Mapping[str, Any]) -> bool:
    """Whether a body (state split off) still changes the resource: anything but its resourceVersion."""
    meta = {k: v for k, v in (rest.get("metadata") or {}).items() if k != "resourceVersion"}
    return bool(meta) or any(k != "metadata" for k in rest)


def believed(home: Mapping[str, Any] | None, resource: Mapping[str, Any]) -> bool:
    """The Lease is this resource's: one of its ownerReferences carries the resource's uid (a namesake left by
    a deleted resource of the same name, or a tenant's look-alike, is not)."""
    uid = (resource.get("metadata") or {}).get("uid")
    refs = ((home or {}).get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs)


def merged(resource: Obj, home: Mapping[str, Any] | None) -> Obj:
    """The resource as the reactor reads it: its own annotations of state replaced by the Lease's, and `STATE_HOME`
    naming the Lease (whether it exists or not: the record of this resource lives there)."""
    out = copy.deepcopy(resource)
    meta = out.setdefault("metadata", {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not reactor_key(k)}
    if believed(home, resource):
        annotations.update({k: v for k, v in ((home or {}).get("metadata") or {}).get("annotations", {}).items()
                            if reactor_key(k) and k != STATE_HOME and isinstance(v, str)})
    annotations[STATE_HOME] = home_name(str(meta.get("name", "")))
    meta["annotations"] = annotations
    return out


def owner_reference(resource: Mapping[str, Any]) -> dict[str, Any]:
    meta = resource.get("metadata") or {}
    return {"apiVersion": resource.get("apiVersion", ""), "kind": resource.get("kind", ""),
            "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def new_home(resource: Mapping[str, Any], own: Mapping[str, str | None]) -> Obj:
    """The Lease holding `own` for `resource` (None values, deletions in a patch, left out); its spec is empty (no
    holder: nothing is elected with it)."""
    meta = resource.get("metadata") or {}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {},
            "metadata": {"name": home_name(str(meta.get("name", ""))), "namespace": meta.get("namespace", ""),
                         "labels": dict(MANAGED_BY), "ownerReferences": [owner_reference(resource)],
                         "annotations": {k: v for k, v in own.items() if v is not None}}}


def home_patch(resource: Mapping[str, Any], own: Mapping[str, str | None], version: str | None) -> Obj:
    """A merge patch of the Lease: the state, the ownerReference set to this resource (a namesake's replaced),
    conditional on `version` when given."""
    meta: Obj = {"annotations": dict(own), "ownerReferences": [owner_reference(resource)]}
    if version:
        meta["resourceVersion"] = version
    return {"metadata": meta}
