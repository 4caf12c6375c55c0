"""The cluster view: an object as read (from the API or the watch cache) → the `Workload` the policy decides on.

One reading for the engine and the verifier, so that what is verified is what was decided on: a built-in
kind through `workloads.to_workload`, an operator's resource through its adapter (one part of it, the
child the operator runs it as), the Kueue view of a workload with the queue-name label (its queue, its
priority read from Kueue's label), and the reactor's state kept only where its MAC verifies. Also how
far the workload's rollout has got: a built-in kind's from its controller's status (`rollout.progress`),
an operator's from its adapter's rollout reader and the child it runs.

Pure but for `child`, which lists through the reads it is handed (the notification's Reader, or the
verifier's cache-first lister): no gateway here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reactor.cluster.adapted import adapted_workload
from reactor.cluster.rollout import Progress, progress
from reactor.cluster.workloads import gpu_count, to_workload
from reactor.core.errors import PermanentError
from reactor.core.model import PATCHABLE_KINDS, Bounds, Workload, WorkloadRef
from reactor.integrations import kueue
from reactor.integrations.adapters import Adapter, Adapters
from reactor.integrations.adapters.base import read
from reactor.state.annotations import read_state
from reactor.state.seal import StateKeys, authenticate

Obj = Mapping[str, Any]
Lister = Callable[[str, str], list[dict[str, Any]]]


class QueueReader(Protocol):
    """What the Kueue bounds need read: the ClusterQueue's quota behind a LocalQueue (the notification's Reader)."""

    def cluster_queue_quota(self, namespace: str, queue: str, resource: str) -> tuple[int, int] | None: ...
# The children an operator runs its resource as that the view looks up to follow a rollout: built-in kinds
# with a pod template and a controller's status (a Knative Service or a RayCluster is read by the resource's
# own status instead).
_CHILD_KINDS = ("Deployment", "StatefulSet")


class ClusterView:
    """How the reactor reads a workload; a value (the settings' adapters, the GPU resource, the state keys)."""

    def __init__(self, *, adapters: Adapters, gpu_resource: str, state_keys: StateKeys | None) -> None:
        self.adapters, self.gpu_resource, self.state_keys = adapters, gpu_resource, state_keys

    def changeable(self, kind: str) -> bool:
        """A kind the reactor may have changed: a built-in patchable kind or an enabled operator's kind."""
        return kind in PATCHABLE_KINDS or self.adapters.get(kind) is not None

    def adapter(self, kind: str) -> Adapter | None:
        return self.adapters.get(kind)

    def workload(self, obj: Obj, kind: str, *, part: str = "", child: Obj | None = None,
                 via: WorkloadRef | None = None, kueue_label_mutable: Callable[[], bool] = lambda: True) -> Workload:
        """The workload as the policy sees it: adapted, Kueue-managed, its state authenticated.
        `kueue_label_mutable`: whether the installed Kueue lets the priority label change (asked only for a
        workload Kueue manages; kueue.label_mutable_on). PermanentError when an operator's resource has no
        template `part` (any more)."""
        adapter = self.adapters.get(kind)
        if adapter is None:
            base = to_workload(obj, kind, self.gpu_resource, via=via)
        else:
            found = adapted_workload(adapter, obj, part, self.gpu_resource, child=child, via=via)
            if found is None:
                meta = obj.get("metadata") or {}
                raise PermanentError(f"{kind} {meta.get('namespace')}/{meta.get('name')} has no pod template "
                                     f"{part!r} any more")
            base = found
        return authenticate(kueue.as_managed(base, obj, kueue_label_mutable), self.state_keys)

    def queue_bounds(self, bounds: Bounds, workload: Workload, reader: QueueReader) -> Bounds:
        """The namespace's bounds, and for a Kueue-managed workload its ClusterQueue's GPU quota as one more."""
        if not workload.queue:
            return bounds
        quota = reader.cluster_queue_quota(workload.ref.namespace, workload.queue, self.gpu_resource)
        return kueue.with_cluster_queue(bounds, quota, workload.queue)

    def part_of(self, obj: Obj, kind: str) -> str:
        """Which template of an operator's resource the reactor's pending change is on: the part recorded with
        the verification, else the one holding the container the last action changed, else the first."""
        adapter = self.adapters.get(kind)
        if adapter is None:
            return ""
        meta = obj.get("metadata") or {}
        state = read_state({k: v for k, v in (meta.get("annotations") or {}).items() if isinstance(v, str)})
        parts = adapter.parts(obj)
        names = [p.name for p in parts]
        if state.verification is not None and state.verification.part in names:
            return state.verification.part
        container = state.last_action.container if state.last_action is not None else None
        for p in parts:
            containers = read(obj, (*p.spec_path, "containers")) or []
            if any(isinstance(c, Mapping) and c.get("name") == container for c in containers) \
                    or (p.model is not None and p.model[0] == container):
                return p.name
        return names[0] if names else ""

    def child(self, obj: Obj, kind: str, lister: Lister) -> dict[str, Any] | None:
        """The Deployment or StatefulSet the operator runs its resource as (controller reference to its uid), or
        None: another kind of child, or none yet."""
        adapter = self.adapters.get(kind)
        meta = obj.get("metadata") or {}
        uid, namespace = meta.get("uid"), str(meta.get("namespace") or "")
        if adapter is None or not uid:
            return None
        for child_kind in _CHILD_KINDS:
            if child_kind not in adapter.children:
                continue
            for candidate in lister(child_kind, namespace):
                refs = (candidate.get("metadata") or {}).get("ownerReferences") or []
                if any(isinstance(r, Mapping) and r.get("controller") and r.get("uid") == uid for r in refs):
                    return candidate
        return None

    def progress(self, obj: Obj, workload: Workload, child: Obj | None = None) -> Progress:
        """How far the workload's rollout has got. An operator's: its adapter's rollout reader, and, where the
        child is known, that the operator carried the last change to the child's template at all (until it
        does, nothing of the change runs: the child's own rollout says nothing about it)."""
        kind = workload.ref.kind
        adapter = self.adapters.get(kind)
        if adapter is None:
            return progress(obj, kind)
        trouble = adapter.rollout(obj, child) or (_not_carried(workload, child, self.gpu_resource) if child else "")
        return Progress(not trouble, trouble)


def _not_carried(workload: Workload, child: Obj, gpu_resource: str) -> str:
    """Why the child's pod template does not show the last action yet ("" when it does, or cannot say)."""
    last = workload.state.last_action
    template = (((child.get("spec") or {}).get("template") or {}).get("spec") or {})
    if last is None or not template:
        return ""
    name = f"{child.get('kind')} {(child.get('metadata') or {}).get('name')}"
    if last.action == "resize-gpu" and last.container is not None:
        for c in template.get("containers") or []:
            if isinstance(c, Mapping) and c.get("name") == last.container:
                has = gpu_count(c.get("resources"), gpu_resource)
                if str(has) != str(last.to_value):
                    return f"the operator has not carried the change to {name} yet ({last.container}: {has} GPUs)"
    if last.action == "set-priority" and not workload.queue and template.get("priorityClassName") != last.to_value:
        return f"the operator has not carried the change to {name} yet (priorityClassName " \
               f"{template.get('priorityClassName')!r})"
    return ""
