"""The adapter value, the set of enabled adapters (a value), and the pure reads and writes by path.

Paths are tuples of keys (str) and list indexes (int) from the object's root. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]
Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Part:
    """One pod template inside a custom resource: a Ray worker group, a LeaderWorkerSet's leader.

    `name` is "" where the resource has a single template; `spec_path` leads to the pod spec (the
    object holding `containers` and `priorityClassName`); `replicas_path` to its replica count, if
    it has one; `max_replicas_path` to a ceiling raised with it where the operator has one; `model`
    to a container the operator builds from a spec of its own (its `resources` are the container's).
    """

    name: str
    spec_path: Path
    replicas_path: Path | None = None
    max_replicas_path: Path | None = None
    default_replicas: int = 1
    # A container described apart from the pod spec (KServe's `predictor.model`): (name, path of its object).
    model: tuple[str, Path] | None = None
    # Pods one replica of this part is made of, from this template (a Ray worker group's numOfHosts; a
    # LeaderWorkerSet group's size − 1 workers, or all `size` pods where leader and workers share the template).
    pods: int = 1
    # A floor the operator clamps replicas to (a Ray worker group's minReplicas): scaling below it does nothing.
    min_replicas_path: Path | None = None


@dataclass(frozen=True, slots=True)
class Adapter:
    """How the reactor reads and writes one operator's kind."""

    kind: str
    group: str
    version: str
    plural: str
    children: frozenset[str]  # kinds the operator creates with a controller reference to it
    parts: Callable[[Obj], tuple[Part, ...]]
    owner_label: str = ""  # label its children carry with its name ("" where it sets none)
    part_label: str = ""  # pod label naming the part, where there are several
    rollout: Callable[[Obj, Obj | None], str] = field(default=lambda obj, child: "")
    # (child kind, owner kind) links the operator builds below its resource, believed by uid and owner label.
    hops: frozenset[tuple[str, str]] = frozenset()
    pod_part: Callable[[Mapping[str, Any]], str] | None = None  # the part a pod's labels name, if not part_label
    # Labels with a fixed value the operator also puts on its children (KubeRay's ray.io/originated-from-crd).
    child_labels: tuple[tuple[str, str], ...] = ()
    # The fields (resize-gpu, scale-replicas, set-priority) its webhook refuses or its controller never carries
    # to a pod, given the resource as read, each with the reason: refused as `operator-forbids`, never written.
    forbidden: Callable[[Obj], Mapping[str, str]] = field(default=lambda obj: {})
    # The same for one part, given the GPU resource the reactor manages (a KServe component in a serverless canary,
    # a predictor whose GPUs come from its ServingRuntime): merged over `forbidden` for that part only.
    part_forbidden: Callable[[Obj, Part, str], Mapping[str, str]] | None = None
    # A template change brings up a whole new copy before the old one goes (a RayService's zero-downtime upgrade
    # prepares a new RayCluster): every replica of the part is surge while both run.
    replaces_all: bool = False
    # Replicas of new pods a template change starts beside the old ones, given the resource and its replicas,
    # where the operator rolls them itself (a LeaderWorkerSet's maxSurge groups); None: read from the child.
    surge: Callable[[Obj, int], int] | None = None
    # (group, plural) of the objects the resolver GETs between the pods and the resource, besides the resource
    # itself (KServe's serverless mode: Knative's Revisions, Configurations and Services): RBAC grants get on them.
    reads: tuple[tuple[str, str], ...] = ()
    # The owner's side of a link (issue 24, item 8): why `owner` does not name or record `child` (of kind
    # `child_kind`) the way its operator does (`<isvc>-predictor`, a RayService's activeServiceStatus, a JobSet's
    # `<jobset>-<replicatedJob>-<index>`), None when it does. A uid and labels can be copied by anyone who may
    # create the child kind; the name the operator gives its child, or the record it keeps of it, cannot be taken
    # over without the operator noticing. None: the adapter declares no naming rule, so its links are believed
    # for recommendations only (the reactor never writes through them).
    names_child: Callable[[Obj, str, Obj], str | None] | None = None
    # The same for a hop below the resource (`hops`): why the intermediate owner does not name its child.
    names_hop: Callable[[Obj, str, Obj], str | None] | None = None
    # The operator copies the resource's annotations into its pods' template (KServe: all but a short disallow
    # list, pkg/constants ServiceAnnotationDisallowedList): the reactor's own state must live elsewhere, or each
    # write of it restarts the pods (cluster/kube/state_home.py keeps it on a Lease the resource owns).
    state_apart: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def part(self, obj: Obj, name: str) -> Part | None:
        """The part called `name`; with a single part, that part whatever the name."""
        parts = self.parts(obj)
        if len(parts) == 1 and not self.part_label and self.pod_part is None:
            return parts[0]
        return next((p for p in parts if p.name == name), None)

    def part_of_pod(self, pod_labels: Mapping[str, Any]) -> str:
        if self.pod_part is not None:
            return self.pod_part(pod_labels)
        return str(pod_labels.get(self.part_label, "")) if self.part_label else ""


@dataclass(frozen=True, slots=True)
class Adapters:
    """The enabled adapters, by kind: a value built from the settings (`Settings.adapters`) and handed to
    whatever resolves, reads, decides on or writes an operator's resource. No module state: two engines
    with different settings in one process each see their own."""

    items: tuple[Adapter, ...] = ()
    _by_kind: Mapping[str, Adapter] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_kind", {a.kind: a for a in self.items})

    def get(self, kind: str) -> Adapter | None:
        return self._by_kind.get(kind)

    def __iter__(self) -> Iterator[Adapter]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def kinds(self) -> frozenset[str]:
        return frozenset(self._by_kind)


def read(obj: Any, path: Path) -> Any:
    """The value at `path`, or None where any step is missing or of the wrong shape."""
    node = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and -len(node) <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node


def written(obj: Obj, changes: Mapping[Path, Callable[[Any], Any]]) -> dict[str, Any]:
    """A deep copy of `obj` with each path's value replaced by `change(old)`; missing maps are created."""
    out = copy.deepcopy(dict(obj))
    for path, change in changes.items():
        node: Any = out
        for step in path[:-1]:
            node = node[step] if isinstance(step, int) else node.setdefault(step, {})
        last = path[-1]
        old = node[last] if isinstance(last, int) else node.get(last)
        node[last] = change(old)
    return out
