"""Resolve alerts to the workloads that own their pods, reading each object at most once per notification.

Pod → ReplicaSet → Deployment, Pod → StatefulSet, Pod → Job → CronJob; a Job without a CronJob,
a bare Pod or any other owner is reported as such (the policy refuses it). The `Reader` is the
notification's cache: API reads grow with the pods, workloads and namespaces touched, never
with the number of alerts. `Owners` remembers pod → workload across notifications, so a pod
seen before costs only the read of its workload.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactor.cluster.cache import ALL, Store
from reactor.cluster.kube import KubeGateway, NotFound
from reactor.core.errors import PermanentError
from reactor.core.model import WorkloadRef
from reactor.core.ownership import ControllerRef, controller_ref, link_failure
from reactor.integrations import kueue
from reactor.integrations.adapters import Adapter, Adapters
from reactor.integrations.adapters.base import Climb
from reactor.integrations.adapters.links import adapted_link_failure, hop_failure

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_DEPTH = 4
# Above this many distinct pods in a namespace, one LIST is cheaper than a GET per pod.
LIST_PODS_ABOVE = 4
# Pods whose owner is remembered across notifications (see `Owners`), and for how long.
OWNERS_SIZE = 10_000
OWNERS_TTL_SECONDS = 600.0
REMEMBERED = frozenset({"Deployment", "StatefulSet", "CronJob"})
_BUILTIN_OWNERS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job", "CronJob"})
Below = tuple[Adapter, str, dict[str, Any]]  # (the adapter whose hop it passed, kind, object)


def valid_namespace(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS_LABEL.match(name))


def valid_name(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


@dataclass(frozen=True, slots=True)
class Owner:
    """What a pod resolved to: the workload, the object found for it, and the Job it came through."""

    ref: WorkloadRef
    obj: dict[str, Any] | None  # None for unsupported or unverified owners
    via: WorkloadRef | None = None
    unverified: str = ""  # why the link to `ref` was not believed (see ownership.py); "" when it was
    part: str = ""  # for an operator's resource: the template the pod came from (see adapters)
    child: dict[str, Any] | None = None  # for an operator's resource: the Deployment/StatefulSet it runs


class UnknownPodLimit(Exception):
    """More controllers of pods that do not exist than one notification may read (`server.maxUnknownPods`)."""


class Reader:
    """Reads shared within one notification; thread-safe so workloads can be handled in parallel.

    A pod that does not exist costs reads to find the controller it came from (`_former_owner`):
    at most `unknown_limit` such controller names per notification are looked up (pods of one
    ReplicaSet share one), so a notification naming hundreds of vanished or invented pods costs a
    bounded number of API requests.

    With a watch-fed `cache` (reactor/cluster/cache.py), the cached kinds are read from it where it is synced
    (a miss there means "does not exist"); pods and uncached kinds are read from the API. After
    `forget` (a write, a 409), that object is read from the API, never the cache, for the rest of the
    notification: the re-read after a conflict must see what the server holds now.
    """

    def __init__(self, kube: KubeGateway, unknown_limit: int = 1 << 30, deadline: float = float("inf"),
                 clock: Callable[[], float] = time.monotonic, cache: Store | None = None, *,
                 adapters: Adapters) -> None:
        self.kube = kube
        self.adapters = adapters  # the operators' kinds the settings enable: read through, resolved to
        self._cache = cache
        self._fresh: set[tuple[str, str, str]] = set()
        self._unknown_limit = unknown_limit
        self._unknown_names: set[tuple[str, str]] = set()
        self._deadline, self._clock = deadline, clock
        # What this notification read, from the API or the watch cache, by (kind, namespace, name): read once.
        self._objects: dict[tuple[str, str, str], dict[str, Any] | None] = {}
        self._lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._refused: dict[tuple[str, ...], PermanentError] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, namespace: str, name: str, *, referenced: bool = False) -> dict[str, Any] | None:
        """The object, or None if it does not exist; each (kind, namespace, name) is read once (from the watch
        cache or the API), and the notification's readers share what was read, as they share everything it reads.

        `referenced`: a controller reference names it, so it existed a moment ago: if the cache does
        not hold it (a new ReplicaSet the watch has not delivered yet), the API is asked.
        """
        key = (kind, namespace, name)
        if self._cache is not None and key not in self._fresh:
            known = self._objects.get(key)  # read already in this notification (the pods of a workload lead to it)
            if known is not None:
                return known
            cached = self._cache.lookup(kind, namespace, name)
            if isinstance(cached, dict):
                self._objects[key] = cached
                return cached
            if cached is None and not referenced:
                return None
        return self._once(key, self._objects, lambda: self._get_or_none(kind, namespace, name))

    def list_objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """Every object of a kind in a namespace; each (kind, namespace) is listed once."""
        cached = self._cache.objects(kind, namespace) if self._cache is not None else None
        if isinstance(cached, list):
            return cached
        return self._once((kind, namespace), self._lists, lambda: self.kube.list_objects(kind, namespace))

    def priority_classes(self) -> frozenset[str]:
        """Names of the cluster's PriorityClasses, listed once per notification."""
        return frozenset((pc.get("metadata") or {}).get("name", "") for pc in self.priority_class_objects())

    def priority_class_objects(self) -> list[dict[str, Any]]:
        """The cluster's PriorityClasses, listed once per notification."""
        cached = self._cache.objects("PriorityClass", ALL) if self._cache is not None else None
        if isinstance(cached, list):
            return cached
        return self._once(("PriorityClass", ""), self._lists, self.kube.list_priority_classes)

    def cluster_queue_quota(self, namespace: str, queue: str, resource: str) -> tuple[int, int] | None:
        """Kueue: (nominal, used) GPUs of the ClusterQueue behind a LocalQueue, read once per notification."""
        def fetch() -> tuple[int, int] | None:
            try:
                local = self.kube.get_custom(kueue.GROUP, kueue.VERSION, "localqueues", namespace, queue)
                target = str((local.get("spec") or {}).get("clusterQueue", ""))
                cq = self.kube.get_custom(kueue.GROUP, kueue.VERSION, "clusterqueues", None, target)
            except NotFound:
                return (0, 0)  # no queue: Kueue admits nothing more, so nothing may grow
            return kueue.cluster_queue_quota(cq, resource)
        return self._once(("ClusterQueueOf", namespace, queue), self._objects, fetch)

    def workload_priority_classes(self) -> frozenset[str]:
        """Names of Kueue's WorkloadPriorityClasses, listed once per notification."""
        return self._kueue()[1]

    def kueue_label_mutable(self) -> bool:
        """Whether the installed Kueue lets the priority label change: the API versions it serves tell (v1beta2
        from v0.15 on, see kueue.label_mutable_on); found by the same list that reads the classes."""
        return kueue.label_mutable_on(self._kueue()[0])

    def _kueue(self) -> tuple[str, frozenset[str]]:
        """(the Kueue API version served, the WorkloadPriorityClass names): v1beta2 asked first, v1beta1 where it is
        not served (404), ("", none) where neither is (a queue label without Kueue), once per notification."""
        def fetch() -> tuple[str, frozenset[str]]:
            try:
                version = kueue.V1BETA2
                items = self.kube.list_cluster_custom(kueue.GROUP, version, "workloadpriorityclasses")
            except NotFound:
                try:
                    version = kueue.VERSION
                    items = self.kube.list_cluster_custom(kueue.GROUP, version, "workloadpriorityclasses")
                except NotFound:  # no Kueue serves here: no class exists and no label may change
                    return "", frozenset()
            return version, frozenset((c.get("metadata") or {}).get("name", "") for c in items)
        return self._once(("KueueAPI", ""), self._objects, fetch)

    def get_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A custom object the resolver passes on the way up (a Knative Revision), None if absent; read once."""
        def fetch() -> dict[str, Any] | None:
            try:
                return self.kube.get_custom(group, version, plural, namespace, name)
            except NotFound:
                return None
        return self._once((group, plural, namespace, name), self._objects, fetch)

    def _get_or_none(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.kube.get(kind, namespace, name, self.adapters.get(kind))
        except NotFound:
            return None

    def _once(self, key: tuple[str, ...], cache: dict[Any, Any], fetch: Callable[[], Any]) -> Any:
        """`fetch()` once per key; a refusal (403, 422) is remembered too: asking again gets the same answer."""
        with self._lock:
            if key in cache:
                return cache[key]
            if key in self._refused:
                raise self._refused[key]
        try:
            value = fetch()
        except PermanentError as e:
            with self._lock:
                self._refused[key] = e
            raise
        with self._lock:
            cache[key] = value
        return value

    def prime_pods(self, namespace: str, names: set[str]) -> None:
        """Fill the pod cache for many pods of one namespace with a single LIST."""
        if len(names) <= LIST_PODS_ABOVE:
            return
        try:
            pods = self.list_objects("Pod", namespace)
        except PermanentError as e:
            # A refused LIST fails these pods' alerts with the refusal named: no silent fallback
            # that would hide a broken RBAC grant behind one read per pod.
            with self._lock:
                for name in names:
                    self._refused.setdefault(("Pod", namespace, name), e)
            return
        found = {(p.get("metadata") or {}).get("name"): p for p in pods}
        with self._lock:
            for name in names:
                self._objects.setdefault(("Pod", namespace, name), found.get(name))

    def past_deadline(self) -> bool:
        """The notification's time is up: what is not decided yet is skipped (DEADLINE_EXCEEDED)."""
        return self._clock() >= self._deadline

    def take_unknown(self, namespace: str, owner_name: str) -> None:
        """Spend one lookup of a vanished pod's controller name (once per name); UnknownPodLimit when none is left."""
        with self._lock:
            if (namespace, owner_name) in self._unknown_names:
                return
            if len(self._unknown_names) >= self._unknown_limit:
                raise UnknownPodLimit()
            self._unknown_names.add((namespace, owner_name))

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """Drop a cached object after a write or a conflict, so the next read is fresh."""
        with self._lock:
            self._objects.pop((kind, namespace, name), None)
            self._fresh.add((kind, namespace, name))


class Owners:
    """Which workload each pod belongs to, remembered across notifications: bounded and expiring.

    A pod's controller does not change while the pod lives, and controllers do not hand a pod's
    name to another owner, so once a pod is resolved a notification on it reads only the workload
    (whose state is always read fresh), not the pod and its ReplicaSet or Job again. Entries expire
    after `ttl` seconds, so a name reused after all, or an orphaned pod, is resolved afresh.
    """

    def __init__(self, size: int = OWNERS_SIZE, ttl: float = OWNERS_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._size, self._ttl, self._clock = size, ttl, clock
        self._entries: OrderedDict[tuple[str, str], tuple[float, WorkloadRef, WorkloadRef | None]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, namespace: str, pod: str) -> tuple[WorkloadRef, WorkloadRef | None] | None:
        """(workload, via) of a pod resolved within `ttl`, else None.

        Asked for every pod of every notification, so it takes no lock (one dict read is atomic; why a lock per
        pod costs: reactor/engine/firings.py). Nor does it reorder: entries are kept in the order they were
        resolved, which is the order they expire in, so the oldest one evicted is the one nearest its expiry."""
        entry = self._entries.get((namespace, pod))
        if entry is None:
            return None
        if self._clock() - entry[0] > self._ttl:
            with self._lock:
                if self._entries.get((namespace, pod)) is entry:
                    del self._entries[(namespace, pod)]
            return None
        return entry[1], entry[2]

    def put(self, namespace: str, pod: str, owner: Owner) -> None:
        with self._lock:
            self._entries[(namespace, pod)] = (self._clock(), owner.ref, owner.via)
            self._entries.move_to_end((namespace, pod))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, namespace: str, pod: str) -> None:
        with self._lock:
            self._entries.pop((namespace, pod), None)


def resolve_owner(reader: Reader, namespace: str, pod_name: str, owners: Owners | None = None) -> Owner | None:
    """The workload that owns the pod, or None if neither the pod nor a former owner can be found.

    With `owners`, a pod resolved before costs one read (its workload), and a newly resolved
    patchable owner is remembered there.
    """
    if owners is not None:
        known = owners.get(namespace, pod_name)
        if known is not None:
            obj = reader.get(known[0].kind, namespace, known[0].name)
            if obj is not None:
                return Owner(known[0], obj, known[1])
            owners.forget(namespace, pod_name)  # the workload is gone: walk the chain again
    owner = _walk(reader, namespace, pod_name)
    if owners is not None and owner is not None and owner.obj is not None and owner.ref.kind in REMEMBERED:
        owners.put(namespace, pod_name, owner)
    return owner


def _walk(reader: Reader, namespace: str, pod_name: str) -> Owner | None:
    """Up the controller chain from the pod (or from the owner a vanished pod was created by)."""
    pod = reader.get("Pod", namespace, pod_name)
    if pod is None:
        found = _former_owner(reader, namespace, pod_name)
        if found is None:
            return None
        kind, name, obj = found
    else:
        kind, name, obj = "Pod", pod_name, pod
    via: WorkloadRef | None = None
    below: list[Below] = []  # objects passed through an operator's hop (`Adapter.makes_below`)
    for _ in range(MAX_DEPTH):
        ref = controller_ref(obj)
        if ref is None:
            break
        climbed = _climb(reader, (kind, name, obj), ref)
        if climbed is not None:
            return _climbed_owner(reader, *climbed, namespace, pod or {}, via)
        hop = _operator_hop(reader.adapters, kind, obj, ref)
        if ref.kind not in _BUILTIN_OWNERS and hop is None:
            adapter = reader.adapters.get(ref.kind)
            if adapter is None:
                return Owner(WorkloadRef(ref.kind, namespace, ref.name), None)
            return _adapted_owner(reader, adapter, (kind, name, obj), ref, pod or {}, via, below=tuple(below))
        parent = _step_up(reader, namespace, (kind, name, obj), ref)
        if isinstance(parent, Owner):
            return parent
        if hop is not None:
            below.append((hop, kind, obj))
        if kind == "Job":
            via = WorkloadRef("Job", namespace, name)
        kind, name, obj = ref.kind, ref.name, parent
    return Owner(WorkloadRef(kind, namespace, name), obj, via)


def _step_up(reader: Reader, namespace: str, child: tuple[str, str, dict[str, Any]],
             ref: ControllerRef) -> dict[str, Any] | Owner:
    """The controller above `child` if the link holds (ownership.py, or an operator's hop), else where to stop."""
    kind, name, obj = child
    target = WorkloadRef(ref.kind, namespace, ref.name)
    hop = _operator_hop(reader.adapters, kind, obj, ref)
    parent = reader.get(ref.kind, namespace, ref.name, referenced=True)
    if parent is None:  # the owner is gone (being deleted): nothing safe to patch
        return Owner(target, None, unverified=f"{kind} {name}: its {ref.kind} is gone" if hop else "")
    failure = hop_failure(hop, kind, obj, ref.name, ref.uid, parent) if hop else link_failure(kind, obj, ref, parent)
    if failure is not None:
        return Owner(target, None, unverified=f"{kind} {name}: {failure}")
    return parent


def _operator_hop(adapters: Adapters, kind: str, obj: dict[str, Any], ref: ControllerRef) -> Adapter | None:
    """The enabled adapter whose operator builds a link `kind` → `ref.kind` on the way up (a LeaderWorkerSet's
    worker StatefulSet is controlled by its leader pod), judged by the label the operator puts on the child."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for adapter in adapters:
        if (kind, ref.kind) in adapter.hops and adapter.owner_label in labels:
            return adapter
    return None


def _adapted_owner(reader: Reader, adapter: Adapter, child: tuple[str, str, dict[str, Any]], ref: ControllerRef,
                   pod: dict[str, Any], via: WorkloadRef | None, below: tuple[Below, ...] = ()) -> Owner:
    """The operator's resource above `child`, believed only through a link the operator builds, and only if the
    resource would have made what the walk passed through hops to get here (`below`: a LeaderWorkerSet's worker
    StatefulSet, which one of size 1 never makes)."""
    kind, name, obj = child
    namespace = str((obj.get("metadata") or {}).get("namespace", ""))
    target = WorkloadRef(ref.kind, namespace, ref.name)
    if ref.group != adapter.group:  # a namesake kind of another API group is not the operator's resource
        return Owner(target, None, unverified=f"{kind} {name}: its controller {ref.kind} {ref.name} is of "
                                              f"{ref.api_version!r}, not {adapter.api_version}")
    parent = reader.get(ref.kind, namespace, ref.name, referenced=True)
    if parent is None:
        return Owner(target, None)
    failure = adapted_link_failure(adapter, kind, obj, ref.name, ref.uid, parent)
    if failure is not None:
        return Owner(target, None, unverified=f"{kind} {name}: {failure}")
    for hop, hop_kind, hop_obj in below:
        failure = adapter.makes_below(parent, hop_kind, hop_obj) if hop is adapter else \
            f"it is a {hop.kind} link, yet the walk above it ends at a {adapter.kind}"
        if failure is not None:
            hop_name = (hop_obj.get("metadata") or {}).get("name", "")
            return Owner(target, None, unverified=f"{hop_kind} {hop_name}: {failure}")
    above = controller_ref(parent)
    if above is not None:  # e.g. a RayCluster a RayService manages: it would write the resource back
        outer = reader.adapters.get(above.kind)
        if outer is not None and adapter.kind in outer.children:  # changed through its controller's resource
            return _adapted_owner(reader, outer, (adapter.kind, ref.name, parent), above, pod, via)
        return Owner(WorkloadRef(above.kind, namespace, above.name), None)
    # The pod's labels name its template; a vanished pod's come from the controller it was found through.
    source = pod or ((obj.get("spec") or {}).get("template") or obj)
    part = adapter.part_of_pod((source.get("metadata") or {}).get("labels") or {})
    return Owner(target, parent, via, part=part, child=None if kind == "Pod" else obj)


def _climb(reader: Reader, child: tuple[str, str, dict[str, Any]], ref: ControllerRef) -> tuple[Adapter, Climb] | None:
    """The enabled adapter whose operator builds its own chain of objects from `ref` up to its resource (KServe's
    serverless mode: Knative's Revision, Configuration and Service), and where its walk up that chain ended."""
    kind, _, obj = child
    namespace = str((obj.get("metadata") or {}).get("namespace", ""))

    def fetch(group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        return reader.get_custom(group, version, plural, namespace, name)
    for adapter in reader.adapters:
        climbed = adapter.climb(kind, obj, ref, fetch)
        if climbed is not None:
            return adapter, climbed
    return None


def _climbed_owner(reader: Reader, adapter: Adapter, climbed: Climb, namespace: str, pod: dict[str, Any],
                   via: WorkloadRef | None) -> Owner:
    """The resource above the top of an operator's own chain (`Adapter.climb`), believed as any operator's link is
    (`_adapted_owner`); a hop of the chain not believed stops there, named."""
    if climbed.top is None:
        return Owner(WorkloadRef(climbed.stopped_at[0], namespace, climbed.stopped_at[1]), None,
                     unverified=climbed.failure)
    name = str((climbed.top.get("metadata") or {}).get("name", ""))
    if climbed.above is None or climbed.above.kind != adapter.kind:  # the user's own top object, or another's
        top = climbed.above or ControllerRef(climbed.top_kind, name, "")
        return Owner(WorkloadRef(top.kind, namespace, top.name), None)
    return _adapted_owner(reader, adapter, (climbed.top_kind, name, dict(climbed.top)), climbed.above, pod, via)


def _former_owner(reader: Reader, namespace: str, pod_name: str) -> tuple[str, str, dict[str, Any]] | None:
    """The controller a vanished pod was created by, found through the name it gave the pod.

    After the reactor changes a template, the alerting pod is replaced; its resolve (and late
    repeats of its firing) still name it. Controllers name pods `<replicaset>-<suffix>`,
    `<job>-<suffix>` and `<statefulset>-<ordinal>`, and a Deployment keeps its old ReplicaSets,
    so the owner is still there. Only an object that exists and controls pods is accepted.
    """
    base, _, suffix = pod_name.rpartition("-")
    if not base or not suffix:
        return None
    kinds = ("StatefulSet",) if suffix.isdigit() else ("ReplicaSet", "Job")
    reader.take_unknown(namespace, base)  # pods of one controller share its reads: only a new name spends
    for kind in kinds:
        obj = reader.get(kind, namespace, base)
        if obj is not None:
            return kind, base, obj
    return None
