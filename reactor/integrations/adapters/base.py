"""The adapter base class (one subclass per operator, kopf's ProgressStorage shape: one interface, several
classes), the set of enabled adapters (a value), and the pure reads and writes by path.

Paths are tuples of keys (str) and list indexes (int) from the object's root. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from reactor.core.ownership import ControllerRef
from reactor.integrations.adapters.status import Obj, child_rollout, observed_behind

Path = tuple[str | int, ...]


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

    def replicas_in(self, obj: Obj) -> int | None:
        """The part's replica count as the resource holds it (its default where unset); None where it has none."""
        if self.replicas_path is None:
            return None
        value = read(obj, self.replicas_path)
        return self.default_replicas if value is None else int(value)


@dataclass(frozen=True, slots=True)
class Climb:
    """Where the walk up an operator's own chain of objects between its pods and its resource ended (KServe's
    serverless mode: a Revision's Deployment → Revision → Configuration → Knative Service): the object right under
    the resource (`top`, of kind `top_kind`) and its controller reference, or why a hop was not believed
    (`failure`, naming the (kind, name) it stopped at)."""

    top: Obj | None = None
    top_kind: str = ""
    above: ControllerRef | None = None
    failure: str = ""
    stopped_at: tuple[str, str] = ("", "")


NO_NAMING_RULE = ("the {kind} adapter declares no naming rule (childName): a link to it cannot be confirmed from the "
                  "owner's side, so the reactor only recommends")
Fetch = Callable[[str, str, str, str], Obj | None]  # (group, version, plural, name) in the pod's namespace → object


@dataclass(frozen=True)
class Adapter:
    """How the reactor reads and writes one operator's kind: one subclass per operator overrides what its operator
    does differently; the defaults fit an operator with one template and no refusals of its own, whose pods roll
    out as the Deployment or StatefulSet it runs them as (a custom adapter is exactly that).

    The fields say what the operator's API and labels are called; the methods how it behaves (a subclass that adds
    no field needs no `@dataclass` of its own: it inherits the frozen value's). Pure: no I/O."""

    kind: str
    group: str
    version: str
    plural: str
    children: frozenset[str]  # kinds the operator creates with a controller reference to it
    owner_label: str = ""  # label its children carry with its name ("" where it sets none)
    part_label: str = ""  # pod label naming the part, where there are several
    # (child kind, owner kind) links the operator builds below its resource, believed by uid and owner label.
    hops: frozenset[tuple[str, str]] = frozenset()
    # Labels with a fixed value the operator also puts on its children (KubeRay's ray.io/originated-from-crd).
    child_labels: tuple[tuple[str, str], ...] = ()
    # (group, plural) of the objects the resolver GETs between the pods and the resource, besides the resource
    # itself (KServe's serverless mode: Knative's Revisions, Configurations and Services): RBAC grants get on them.
    reads: tuple[tuple[str, str], ...] = ()
    # The operator copies the resource's annotations into its pods' template (KServe: all but a short disallow
    # list, pkg/constants ServiceAnnotationDisallowedList): the reactor's own state must live elsewhere, or each
    # write of it restarts the pods (state/lease_home.py keeps it on a Lease the resource owns).
    state_apart: ClassVar[bool] = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        """The pod templates inside the resource, as read."""
        return ()

    def part(self, obj: Obj, name: str) -> Part | None:
        """The part called `name`; with a single part (and no label naming parts), that part whatever the name."""
        parts = self.parts(obj)
        if len(parts) == 1 and not self.part_label:
            return parts[0]
        return next((p for p in parts if p.name == name), None)

    def part_of_pod(self, pod_labels: Mapping[str, Any]) -> str:
        """The part a pod was made from, by its labels."""
        return str(pod_labels.get(self.part_label, "")) if self.part_label else ""

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        """Why the operator's own rollout is still in progress ("" when it is not), given the Deployment or
        StatefulSet it runs the resource as, where known. By default: the generation the operator observed, where
        its status reports one, and the child's rollout."""
        return observed_behind(obj) or child_rollout(child)

    def forbidden(self, obj: Obj) -> Mapping[str, str]:
        """The fields (resize-gpu, scale-replicas, set-priority) its webhook refuses or its controller never carries
        to a pod, given the resource as read, each with the reason: refused as `operator-forbids`, never written."""
        return {}

    def refusals(self, obj: Obj, part: Part, gpu_resource: str) -> dict[str, str]:
        """What the operator refuses on one part (`forbidden`, and a part's own refusals where a subclass has
        them), and scaling below the floor it clamps that part's replicas to (a Ray worker group's minReplicas)."""
        out = dict(self.forbidden(obj))
        floor = read(obj, part.min_replicas_path) if part.min_replicas_path is not None else None
        replicas = part.replicas_in(obj)
        if isinstance(floor, int) and replicas is not None and replicas <= floor:
            out["scale-replicas-down"] = (f"the operator keeps {part.name or 'it'} at minReplicas {floor} or more "
                                          f"(it clamps replicas to it): scaling below changes no pod")
        return out

    def surge(self, obj: Obj, replicas: int, *, child: Obj | None, child_surge: int) -> int:
        """Replicas of new pods a template change starts beside the old ones, given the part's `replicas` and the
        child it runs as: by default what the child's own rolling update adds (`child_surge`, a Deployment's
        maxSurge; 0 for a StatefulSet)."""
        return child_surge

    def surge_beside(self, obj: Obj, part: Part, surge: int) -> tuple[tuple[Part, int], ...]:
        """The resource's other templates whose pods a template change of `part` (with `surge` of its replicas
        started beside the old ones) starts too, each with its replicas: by default none (one template rolls)."""
        return ()

    def label_beside(self, obj: Obj, part: Part, surge: int, *, child: Obj | None) -> tuple[tuple[Part, int], ...]:
        """The other templates whose pods a change of the resource's own labels starts (Kueue's priority label, where
        the operator copies labels into its templates), each with its replicas: by default those a template change of
        `part` starts (`surge_beside`)."""
        return self.surge_beside(obj, part, surge)

    def part_rollout(self, obj: Obj, part: str, child: Obj | None) -> str:
        """Why the rollout of one part is still in progress ("" when it is not): by default the resource's
        (`rollout`); an operator that reports each part's readiness apart (KServe's components) reads that part's."""
        return self.rollout(obj, child)

    def running(self, obj: Obj, part: Part, child: Obj | None) -> tuple[int | None, str]:
        """(replicas of `part` the operator runs where more than the resource says, why a scale is then refused):
        by default (None, ""): the resource's count is what runs."""
        return None, ""

    def effect(self, obj: Obj) -> str:
        """What a template change does to the running pods where it is more than a rolling update ("" when it is
        not): said in the plan and the Event of each such change."""
        return ""

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        """The owner's side of a link (issue 24, item 8): why `owner` does not name or record `child` the way its
        operator does (`<isvc>-predictor`, a RayService's activeServiceStatus, a JobSet's
        `<jobset>-<replicatedJob>-<index>`), None when it does. A uid and labels can be copied by anyone who may
        create the child kind; the name the operator gives its child, or the record it keeps of it, cannot be
        taken over without the operator noticing (naming.py). Not overridden: no rule, so the link is believed for
        recommendations only (`recommend_only`)."""
        return None

    def names_hop(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        """The same for a hop below the resource (`hops`): why the intermediate owner does not name its child."""
        return None

    def makes_below(self, resource: Obj, child_kind: str, child: Obj) -> str | None:
        """The resource's side of a hop below it (`hops`), once the walk reaches the resource: why its operator would
        not have made `child` (a LeaderWorkerSet of size 1 makes no worker StatefulSet, so a StatefulSet claiming
        to be one under its leader pod took a name the operator never uses), None when it would."""
        return None

    def recommend_only(self) -> str:
        """Why the reactor only recommends on this kind ("" when it may act): a link to it that its owner's side
        cannot confirm. By default, that is so unless the subclass declares its operator's naming rule (overrides
        `names_child`): an adapter that forgets it recommends, never writes."""
        return "" if type(self).names_child is not Adapter.names_child else NO_NAMING_RULE.format(kind=self.kind)

    def climb(self, child_kind: str, child: Obj, ref: ControllerRef, fetch: Fetch) -> Climb | None:
        """The operator's own chain above `child`, where `ref` starts one (KServe's serverless mode: Knative's),
        walked with `fetch`; None where it does not."""
        return None


@dataclass(frozen=True, slots=True)
class Adapters:
    """The enabled adapters, by kind: a value built from the settings (`Settings.adapters`) and handed to
    whatever resolves, reads, decides on or writes an operator's resource. No module state: two engines
    with different settings in one process each see their own."""

    items: tuple[Adapter, ...] = ()
    # The Kueue release the policy declares (adapters.kueueVersion), where what Kueue does differs between patch
    # releases the served API versions cannot tell apart (kueue.py `as_managed`); None: undeclared.
    kueue_version: tuple[int, int, int] | None = None
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
