"""The cluster view: an object as read (from the API or the watch cache) → the `Workload` the policy decides on.

One reading for the engine and the verifier, so that what is verified is what was decided on: each kind
read through its `WorkloadKind` (kinds.py: a built-in kind as its controller runs it, an operator's resource
through its adapter, one part of it and the child the operator runs it as), the Kueue view of a workload
with the queue-name label (its queue, its priority read from Kueue's label), and the reactor's state kept
only where its MAC verifies. Also how far the workload's rollout has got, from the same kind.

Pure but for `child`, which lists through the reads it is handed (the notification's Reader, or the
verifier's cache-first lister): no gateway here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reactor.cluster.kinds import Kinds, Lister, WorkloadKind
from reactor.cluster.rollout import Progress
from reactor.core.model import Bounds, Workload, WorkloadRef
from reactor.integrations import kueue
from reactor.integrations.adapters import Adapter, Adapters
from reactor.state.seal import StateKeys, authenticate

Obj = Mapping[str, Any]


class QueueReader(Protocol):
    """What the Kueue bounds need read: the ClusterQueue's quota behind a LocalQueue (the notification's Reader)."""

    def cluster_queue_quota(self, namespace: str, queue: str, resource: str) -> tuple[int, int] | None: ...


class ClusterView:
    """How the reactor reads a workload; a value (the settings' adapters, the GPU resource, the state keys)."""

    def __init__(self, *, adapters: Adapters, gpu_resource: str, state_keys: StateKeys | None) -> None:
        self.adapters, self.gpu_resource, self.state_keys = adapters, gpu_resource, state_keys
        self._kinds = Kinds(adapters, gpu_resource)

    def changeable(self, kind: str) -> bool:
        """A kind the reactor may have changed: a built-in patchable kind or an enabled operator's kind."""
        return self.kind(kind).changeable()

    def adapter(self, kind: str) -> Adapter | None:
        return self.adapters.get(kind)

    def kind(self, kind: str) -> WorkloadKind:
        """How workloads of `kind` are read: through the enabled operator's adapter, else as its controller runs it."""
        return self._kinds.of(kind)

    def workload(self, obj: Obj, kind: str, *, part: str = "", child: Obj | None = None,
                 via: WorkloadRef | None = None, kueue_label_mutable: Callable[[], bool] = lambda: True) -> Workload:
        """The workload as the policy sees it: adapted, Kueue-managed, its state authenticated.
        `kueue_label_mutable`: whether the installed Kueue lets the priority label change (asked only for a
        workload Kueue manages; kueue.label_mutable_on). PermanentError when an operator's resource has no
        template `part` (any more)."""
        base = self.kind(kind).workload(obj, part=part, child=child, via=via)
        return authenticate(kueue.as_managed(base, obj, kueue_label_mutable, release=self.adapters.kueue_version),
                            self.state_keys)

    def queue_bounds(self, bounds: Bounds, workload: Workload, reader: QueueReader) -> Bounds:
        """The namespace's bounds, and for a Kueue-managed workload its ClusterQueue's GPU quota as one more."""
        if not workload.queue:
            return bounds
        quota = reader.cluster_queue_quota(workload.ref.namespace, workload.queue, self.gpu_resource)
        return kueue.with_cluster_queue(bounds, quota, workload.queue)

    def part_of(self, obj: Obj, kind: str) -> str:
        """Which template of an operator's resource the reactor's pending change is on: the part recorded with
        the verification, else the one holding the container the last action changed, else the first."""
        return self.kind(kind).part_of(obj)

    def child(self, obj: Obj, kind: str, lister: Lister) -> dict[str, Any] | None:
        """The Deployment or StatefulSet the operator runs its resource as (controller reference to its uid), or
        None: a built-in kind, another kind of child, or none yet."""
        return self.kind(kind).child(obj, lister)

    def progress(self, obj: Obj, workload: Workload, child: Obj | None = None) -> Progress:
        """How far the workload's rollout has got: a built-in kind's from its controller's status, an operator's
        from its adapter's rollout reader and the child it runs."""
        return self.kind(workload.ref.kind).progress(obj, workload, child)
