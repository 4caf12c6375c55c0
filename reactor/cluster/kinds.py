"""The kinds the reactor reads and writes workloads of, behind one interface (`WorkloadKind`): a built-in
controller's kind (Deployment, StatefulSet, CronJob, a Job) read from its own spec and status and patched by strategic
merge of its template, and an operator's resource read and patched through its adapter (integrations/adapters). The
view (view.py) and the act step (act/actor.py) make one call on the kind, never a branch on which it is.

Pure but for `child`, which lists through the reads it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reactor.cluster import compute
from reactor.cluster.adapted import adapted_patch, adapted_workload
from reactor.cluster.compute import CPU_ACTION, MEMORY_ACTION
from reactor.cluster.patches import effective_action, template_patch
from reactor.cluster.rollout import Progress, progress
from reactor.cluster.workloads import gpu_count, to_workload
from reactor.core.errors import PermanentError
from reactor.core.model import PATCHABLE_KINDS, Action, LastAction, Workload, WorkloadRef
from reactor.integrations.adapters import Adapter
from reactor.integrations.adapters.base import read
from reactor.integrations.adapters.links import adapted_link_failure
from reactor.state.annotations import read_state

Obj = Mapping[str, Any]
Lister = Callable[[str, str], list[dict[str, Any]]]
# The children an operator runs its resource as that are looked up to follow a rollout: built-in kinds with a pod
# template and a controller's status (a Knative Service or a RayCluster is read by the resource's own status).
_CHILD_KINDS = ("Deployment", "StatefulSet")


class WorkloadKind(Protocol):
    """How the workloads of one kind are read, and how far their rollout has got."""

    def changeable(self) -> bool:
        """A kind the reactor may change (and so may have changed)."""
        ...

    def workload(self, obj: Obj, *, part: str, child: Obj | None, via: WorkloadRef | None) -> Workload:
        """The workload as read, before Kueue's view and the state's authentication."""
        ...

    def part_of(self, obj: Obj) -> str:
        """Which template the reactor's pending change is on ("" for one template)."""
        ...

    def child(self, obj: Obj, lister: Lister) -> dict[str, Any] | None:
        """The Deployment or StatefulSet the workload runs as, where that is another object; None otherwise."""
        ...

    def progress(self, obj: Obj, workload: Workload, child: Obj | None) -> Progress:
        """How far the workload's rollout has got."""
        ...

    def patch(self, obj: Obj, workload: Workload, action: Action, annotations: Mapping[str, str | None], *,
              cpu_apply_to: str) -> dict[str, Any]:
        """The patch that sets `action`'s desired state and records `annotations`, conditional on the read."""
        ...


class Kinds:
    """Each kind's `WorkloadKind`: the enabled operator's adapter for its kind, else the built-in controller's."""

    def __init__(self, adapters: Iterable[Adapter], gpu_resource: str) -> None:
        self.gpu_resource = gpu_resource
        self._operators: dict[str, WorkloadKind] = {a.kind: OperatorKind(a, gpu_resource) for a in adapters}

    def of(self, kind: str) -> WorkloadKind:
        return self._operators.get(kind) or BuiltinKind(kind, self.gpu_resource)


@dataclass(frozen=True, slots=True)
class BuiltinKind:
    """A kind a Kubernetes controller runs: its template and rollout are its own (workloads.py, rollout.py)."""

    kind: str
    gpu_resource: str

    def changeable(self) -> bool:
        return self.kind in PATCHABLE_KINDS

    def workload(self, obj: Obj, *, part: str, child: Obj | None, via: WorkloadRef | None) -> Workload:
        return to_workload(obj, self.kind, self.gpu_resource, via=via)

    def part_of(self, obj: Obj) -> str:
        return ""

    def child(self, obj: Obj, lister: Lister) -> dict[str, Any] | None:
        return None  # its pods are its own controller's: there is nothing between to follow

    def progress(self, obj: Obj, workload: Workload, child: Obj | None) -> Progress:
        return progress(obj, self.kind)

    def patch(self, obj: Obj, workload: Workload, action: Action, annotations: Mapping[str, str | None], *,
              cpu_apply_to: str) -> dict[str, Any]:
        """A strategic merge of the pod template (of the job template, for a CronJob): patches.py."""
        return template_patch(action, workload, annotations, self.gpu_resource, cpu_apply_to)


@dataclass(frozen=True, slots=True)
class OperatorKind:
    """An operator's kind, read through its adapter: one part of the resource, the child the operator runs it as."""

    adapter: Adapter
    gpu_resource: str

    def changeable(self) -> bool:
        return True

    def workload(self, obj: Obj, *, part: str, child: Obj | None, via: WorkloadRef | None) -> Workload:
        """PermanentError when the resource has no template `part` (any more)."""
        found = adapted_workload(self.adapter, obj, part, self.gpu_resource, child=child, via=via)
        if found is None:
            meta = obj.get("metadata") or {}
            raise PermanentError(f"{self.adapter.kind} {meta.get('namespace')}/{meta.get('name')} has no pod "
                                 f"template {part!r} any more")
        return found

    def part_of(self, obj: Obj) -> str:
        """The part recorded with the verification, else the one holding the container the last action changed,
        else the first."""
        meta = obj.get("metadata") or {}
        state = read_state({k: v for k, v in (meta.get("annotations") or {}).items() if isinstance(v, str)})
        parts = self.adapter.parts(obj)
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

    def child(self, obj: Obj, lister: Lister) -> dict[str, Any] | None:
        """The Deployment or StatefulSet the operator runs its resource's changed part as (controller reference to
        its uid, and the labels and name the operator gives it: links.py, as the ownership walk checks), or None:
        another kind of child, or none yet. Where the operator labels its children with their part (KServe's
        `component` on each component's Deployment and Knative Service), the child of the part the pending change
        is on (`part_of`), never merely the first: an explainer's rollout says nothing of a predictor change."""
        meta = obj.get("metadata") or {}
        uid, namespace, name = meta.get("uid"), str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if not uid:
            return None
        label, part = self.adapter.part_label, self.part_of(obj)
        for child_kind in _CHILD_KINDS:
            if child_kind not in self.adapter.children:
                continue
            for candidate in lister(child_kind, namespace):
                candidate_meta = candidate.get("metadata") or {}
                refs = candidate_meta.get("ownerReferences") or []
                if not any(isinstance(r, Mapping) and r.get("controller") and r.get("uid") == uid for r in refs):
                    continue
                if adapted_link_failure(self.adapter, child_kind, candidate, name, str(uid), obj) is not None:
                    continue  # a uid anyone who reads the resource can copy: the operator's labels and name too
                labelled = (candidate_meta.get("labels") or {}).get(label) if label else None
                if labelled is None or labelled == part:  # another part's child: its rollout is not this change's
                    return candidate
        return None

    def progress(self, obj: Obj, workload: Workload, child: Obj | None) -> Progress:
        """The adapter's rollout reader for the changed part, and, where the child is known, that the operator carried
        the last change to the child's template at all (until it does, nothing of the change runs: the child's own
        rollout says nothing about it)."""
        carried = not_carried(workload, child, self.gpu_resource) if child else ""
        trouble = self.adapter.part_rollout(obj, workload.part, child) or carried
        return Progress(not trouble, trouble)

    def patch(self, obj: Obj, workload: Workload, action: Action, annotations: Mapping[str, str | None], *,
              cpu_apply_to: str) -> dict[str, Any]:
        """A JSON merge patch of the changed part, the operator's own field paths (adapted.py)."""
        return adapted_patch(self.adapter, obj, workload, effective_action(action, workload), action, annotations,
                             self.gpu_resource, cpu_apply_to)


def not_carried(workload: Workload, child: Obj, gpu_resource: str) -> str:
    """Why the child's pod template does not show the last action yet ("" when it does, or cannot say).

    Until the operator copies its resource's template into the child (a Notebook's StatefulSet, an
    InferenceService's Deployment), the child's own rollout is of the old template: "rolled out" would verify a
    change no pod runs. GPUs, CPU and memory (a raise that went to the template) and the PriorityClass are compared.
    """
    last = workload.state.last_action
    template = (((child.get("spec") or {}).get("template") or {}).get("spec") or {})
    if last is None or not template:
        return ""
    name = f"{child.get('kind')} {(child.get('metadata') or {}).get('name')}"
    if last.action in COMPUTE_ACTIONS and last.container is not None:
        return _compute_not_carried(workload, last, template, name)
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


COMPUTE_ACTIONS = {CPU_ACTION: "cpu", MEMORY_ACTION: "memory"}  # the template's resource each raise changes


def _compute_not_carried(workload: Workload, last: LastAction, template: Obj, name: str) -> str:
    """Why the child's container does not ask the CPU (memory) limit the last raise wrote ("" when it does, or
    cannot say). Only a raise that went to the resource's template is the operator's to carry: one that went to the
    running pods alone (`cpu.applyTo: pods`) left the resource's template, and so the child's, as it was."""
    resource = COMPUTE_ACTIONS[last.action]
    wanted = compute.amount(last.to_value, resource)
    own = workload.container(last.container)
    written = (own.cpu if resource == "cpu" else own.memory) if own is not None else None
    if wanted is None or written is None or written.limit != wanted:
        return ""
    for c in template.get("containers") or []:
        if isinstance(c, Mapping) and c.get("name") == last.container:
            has = compute.container_compute(c.get("resources"), resource)
            if has is None or has.limit != wanted:
                shown = "none" if has is None or has.limit is None else compute.quantity(has.limit, resource)
                return (f"the operator has not carried the change to {name} yet ({last.container}: {resource} "
                        f"limit {shown})")
    return ""
