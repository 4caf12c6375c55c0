"""Immutable values shared by every layer: alerts (alerts.py), workloads, bounds (bounds.py), decisions.

This module holds data only. It imports nothing from Flask, `kubernetes` or
`prometheus_client`, so the policy and its tests can be used without any of them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

# Re-exported: every layer finds the shared values here.
from reactor.core.alerts import KNOWN_ALERTS as KNOWN_ALERTS
from reactor.core.alerts import TEST_ALERT as TEST_ALERT
from reactor.core.alerts import Alert as Alert
from reactor.core.alerts import AlertName as AlertName
from reactor.core.alerts import Notification as Notification
from reactor.core.alerts import Status as Status
from reactor.core.alerts import iso as iso
from reactor.core.bounds import Bounds as Bounds
from reactor.core.bounds import ComputeBounds as ComputeBounds
from reactor.core.bounds import ComputeQuota as ComputeQuota
from reactor.core.bounds import Quota as Quota
from reactor.core.bounds import ScopeTerm as ScopeTerm

EMPTY: Mapping[str, str] = MappingProxyType({})


class Mode(enum.StrEnum):
    """How far the reactor goes on a workload: the policy's default or the `mode` annotation."""

    OFF = "off"
    RECOMMEND = "recommend"
    ENFORCE = "enforce"


class Result(enum.StrEnum):
    """What became of a decision; a metric label value and the `result` of each outcome."""

    APPLIED = "applied"
    RECOMMENDED = "recommended"
    SKIPPED = "skipped"
    FAILED = "failed"


class Kind(enum.StrEnum):
    """Kinds the resolver walks through; only `PATCHABLE_KINDS` are ever written."""

    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    CRONJOB = "CronJob"
    JOB = "Job"
    REPLICASET = "ReplicaSet"
    POD = "Pod"


PATCHABLE_KINDS = frozenset({Kind.DEPLOYMENT, Kind.STATEFULSET, Kind.CRONJOB})


@dataclass(frozen=True, slots=True, order=True)
class WorkloadRef:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Container:
    """A container of the pod template; `gpus` is its GPU limit (= request), 0 if none."""

    name: str
    gpus: int
    cpu: ComputeResources | None = None  # CPU request/limit of the template's container (None: neither set)
    memory: ComputeResources | None = None  # ... and its memory request/limit, in bytes
    sidecar: bool = False  # an init container with restartPolicy Always: it runs beside the containers


@dataclass(frozen=True, slots=True)
class ComputeResources:
    """A container's request and limit of one compute resource (None: not set), in that resource's integer unit:
    millicores for CPU, bytes for memory (the API server's MilliValue and Value)."""

    request: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class LastAction:
    """What the reactor last did to a workload, as recorded in its annotation."""

    action: str
    direction: str  # "down" | "up" | "revert"
    container: str | None
    from_value: int | str | None
    to_value: int | str | None
    fingerprint: str
    starts_at: str
    time: datetime
    alert: str = ""
    # The template part the change was made in (a Ray worker group, an LWS leader or worker); "" for one template.
    part: str = ""
    # CPU (memory): the request and limit before this change (`from`/`to` name the limits only); None elsewhere.
    before: ComputeResources | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """How the rollout of the reactor's last action went: pending, verified or reverted (with why)."""

    result: str  # "pending" | "verified" | "reverted"
    strategy: str  # the strategy whose change is verified, e.g. "resize-gpu-up"
    since: datetime  # when the change was written (pending) or the result reached
    reason: str = ""
    part: str = ""  # the template of an operator's resource the change is on ("" for one template)


@dataclass(frozen=True, slots=True)
class ReactorState:
    """The workload's `gpu-reactor.io/*` annotations, parsed and validated."""

    mode: Mode | None = None  # None = the policy's default
    min_gpus: int | None = None
    max_gpus: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    last_action: LastAction | None = None
    cooldown_until: datetime | None = None
    original: Mapping[str, object] = field(default_factory=lambda: EMPTY)
    # Annotation keys whose value could not be parsed: surfaced, never guessed.
    invalid: tuple[str, ...] = ()
    # The reactor's own annotations found without a valid MAC (see statemac.py): never acted on.
    unauthenticated: tuple[str, ...] = ()
    verification: Verification | None = None  # the sealed `verification` annotation (reactor/verification.py)
    # The verified record's write identity (state/seal.py): None when there is none, "" for a `v1:` record.
    write: str | None = None
    # Why the ledger (state/ledger_codec.py) refused the record: "replayed" (not the reactor's latest) or "removed"
    # (the reactor's state is gone within its windows); "" when it counts.
    not_latest: str = ""
    rebalance: Rebalance | None = None  # the sealed `rebalance` record (policy/rebalance.py), authenticated


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One side of a rebalance, as the sealed `rebalance` annotation records it on that side's workload.

    `role` "donor": this workload gave `gpus` GPUs of quota `quota` to the workload named (the receiver); "receiver":
    it was given them by the workload named (the donor). `uid` binds the record to that very object (not one created
    again under the name). `paid` (a receiver's): the firing (fingerprint, startsAt) whose growth was paid for, as its
    `last-action` names it; None on a donor's record and on records written before it existed."""

    role: str  # "donor" | "receiver"
    kind: str
    name: str
    uid: str
    gpus: int
    quota: str
    since: datetime
    paid: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class PodShape:
    """What ResourceQuota scopes look at in the pods a template makes (kube-apiserver's podMatchesScopeFunc).

    `best_effort`: no container or init container sets a positive cpu or memory request or limit (GPUs do not
    count for the QoS class). `terminating`: `activeDeadlineSeconds` >= 0. The PriorityClass is the
    workload's `priority_class`. `cpu` / `memory`: one pod's whole requests and limits as ResourceQuota charges
    them (pkg/quota/v1/evaluator/core/pods.go podComputeUsageHelper over resourcehelper.PodRequests / PodLimits:
    every container and sidecar summed, each other init container by the max rule; a limit alone is the request
    too); None where no container sets the resource.
    """

    best_effort: bool = False
    terminating: bool = False
    cross_namespace_affinity: bool = False
    cpu: ComputeResources | None = None  # millicores
    memory: ComputeResources | None = None  # bytes

    def compute(self, resource: str) -> ComputeResources | None:
        """The pod's totals of `resource` ("cpu" or "memory")."""
        return self.cpu if resource == "cpu" else self.memory


@dataclass(frozen=True, slots=True)
class SurgePods:
    """GPUs of the pods one of an operator's other templates starts with a change, with what decides which scoped
    quotas count them: that template's own PriorityClass and pod shape (kube-apiserver's quota evaluator matches
    each pod by its own spec: pkg/quota/v1/evaluator/core/pods.go podMatchesScopeFunc)."""

    gpus: int
    priority_class: str | None = None
    pods: PodShape = field(default_factory=PodShape)
    template: str = ""  # the template's name in the resource (a Ray worker group, an InferenceService component)
    count: int = 0  # how many pods: the CPU and memory quota lines charge each its whole `pods.cpu` / `pods.memory`


@dataclass(frozen=True, slots=True)
class OperatorFacts:
    """What a workload read through an operator's adapter (integrations/adapters) adds: which of the resource's
    templates it is, what the operator refuses on it, how its rollout stands, and how its replicas count."""

    part: str = ""  # the template inside the operator's resource (a Ray worker group); "" for one template
    rollout: str = ""  # why the operator's own rollout is in progress ("" when it is not)
    # Fields (resize-gpu, scale-replicas, set-priority) the operator refuses or ignores on this resource, and why.
    refusals: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    # Pods one replica stands for, from the template a change touches (a LeaderWorkerSet group's workers, a Ray
    # worker group's numOfHosts): quota and GPU arithmetic count replicas × this.
    pods_per_replica: int = 1
    replica_gpus: int | None = None  # GPUs one more replica takes in all (a whole LWS group); None: one pod's
    # Why the reactor may only recommend on this workload ("" when it may act): a link to it that its owner's
    # side cannot confirm (a custom adapter declaring no naming rule).
    recommend_only: str = ""
    # The pods of the resource's other templates that a template change starts too, besides the changed template's
    # surge (a RayService's whole new RayCluster; a LeaderWorkerSet surge group's leader or workers), per template.
    surge_beside: tuple[SurgePods, ...] = ()
    # The same for a change of the resource's labels (Kueue's priority label), where the operator copies them into
    # every template (KServe: every component rolls, each with its own surge).
    label_surge: tuple[SurgePods, ...] = ()
    # The pods of the resource's other templates that one replica more adds (a LeaderWorkerSet group's leader from
    # its leaderTemplate, beside the workers), per template: the CPU, memory and pod-count lines charge them whole.
    replica_beside: tuple[SurgePods, ...] = ()
    # What a template change does to the running pods where it is more than a rolling update (KubeRay's Recreate
    # deletes every pod, head included): said in the plan and the Event (`Action.effect`).
    effect: str = ""


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """What Kueue adds to a workload it manages (label kueue.x-k8s.io/queue-name; integrations/kueue.py)."""

    queue: str  # the LocalQueue
    # What Kueue's webhooks refuse or its controller undoes on it, and why. `set-priority` is Kueue's alone to
    # decide: its priority is Kueue's label, not the template's priorityClassName an operator may refuse.
    refusals: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    label_rolls: bool = False  # Kueue copies its priority label into the pod template: a label change rolls pods


@dataclass(frozen=True, slots=True)
class Workload:
    """The owner's current state, as read once per notification."""

    ref: WorkloadRef
    resource_version: str
    containers: tuple[Container, ...]
    priority_class: str | None = None
    # The template's init containers (sidecars among them): LimitRange `type: Pod` items count them too.
    init_containers: tuple[Container, ...] = ()
    replicas: int | None = None  # None for CronJob
    generation: int = 0
    observed_generation: int = 0
    updated_replicas: int | None = None
    max_surge: int = 0  # extra pods a template change may create at once
    hpa_managed: bool = False
    state: ReactorState = field(default_factory=ReactorState)
    via: WorkloadRef | None = None  # e.g. the Job through which a CronJob was found
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    pods: PodShape = field(default_factory=PodShape)
    uid: str = ""  # metadata.uid: what the state MAC binds the reactor's annotations to
    operator: OperatorFacts | None = None  # an operator's resource, read and written through its adapter
    kueue: QueueFacts | None = None  # Kueue manages it

    def container(self, name: str | None) -> Container | None:
        """The named container, or the only GPU container when the alert names none."""
        if name is not None:
            return next((c for c in self.containers if c.name == name), None)
        gpu = [c for c in self.containers if c.gpus > 0]
        return gpu[0] if len(gpu) == 1 else None

    @property
    def part(self) -> str:
        """The template of an operator's resource this is ("" for one template, and for the built-in kinds)."""
        return self.operator.part if self.operator is not None else ""

    @property
    def queue(self) -> str:
        """Kueue's LocalQueue; "" when Kueue does not manage it."""
        return self.kueue.queue if self.kueue is not None else ""

    @property
    def refusals(self) -> Mapping[str, str]:
        """What the operator and Kueue refuse on it, by field: the operator's, but for the priority where Kueue
        manages it (its priority is Kueue's label), over Kueue's."""
        own = self.operator.refusals if self.operator is not None else EMPTY
        if self.kueue is None:
            return own
        return {**self.kueue.refusals, **{k: v for k, v in own.items() if k != "set-priority"}}

    @property
    def rolling_out(self) -> bool:
        """A previous change is not yet rolled out: touching it again would stack changes."""
        if (self.operator is not None and self.operator.rollout) or self.observed_generation < self.generation:
            return True
        return (
            self.replicas is not None
            and self.updated_replicas is not None
            and self.updated_replicas < self.replicas
        )


@dataclass(frozen=True, slots=True)
class Signal:
    """All alerts of one notification that target one workload, folded into one input."""

    alert: str
    status: Status
    keys: tuple[tuple[str, str], ...]  # (fingerprint, startsAt) of every alert folded in
    container: str | None
    value: float | None  # the highest measured utilization among the alerts (cautious for shrinking)
    gpus: int | None = None
    idle_gpus: int | None = None
    pods: tuple[str, ...] = ()
    starts_at: str = ""
    fingerprint: str = ""
    cpu_throttling: float | None = None  # the highest throttling ratio among the alerts folded in
    cpu_unknown: bool = False  # some alert said its throttling is unknown


class SkipReason(enum.StrEnum):
    """The closed list of reasons the reactor refuses to act. Metric label values come from here."""

    UNKNOWN_ALERT = "unknown-alert"
    NO_TARGET = "no-target"
    NAMESPACE_NOT_ALLOWED = "namespace-not-allowed"
    NOT_FOUND = "not-found"
    UNSUPPORTED_OWNER = "unsupported-owner"
    MODE_OFF = "mode-off"
    RESOLVED = "resolved"
    METRICS_MISSING = "metrics-missing"
    ALREADY_APPLIED = "already-applied"
    COOLDOWN = "cooldown"
    HYSTERESIS = "hysteresis"
    ROLLOUT_IN_PROGRESS = "rollout-in-progress"
    NO_GPU_CONTAINER = "no-gpu-container"
    AT_MIN_GPUS = "at-min-gpus"
    AT_MAX_GPUS = "at-max-gpus"
    QUOTA_EXCEEDED = "quota-exceeded"
    HPA_MANAGED = "hpa-managed"
    AT_MIN_REPLICAS = "at-min-replicas"
    AT_MAX_REPLICAS = "at-max-replicas"
    PRIORITY_NOT_IN_LADDER = "priority-not-in-ladder"
    PRIORITY_AT_END = "priority-at-end"
    PRIORITY_CLASS_MISSING = "priority-class-missing"
    NOTHING_TO_REVERT = "nothing-to-revert"
    REVERT_HOLD = "revert-hold"
    NOT_APPLICABLE = "not-applicable"
    INVALID_ANNOTATION = "invalid-annotation"
    BUDGET_EXHAUSTED = "budget-exhausted"
    CONFLICT = "conflict"
    API_ERROR = "api-error"
    OWNER_UNVERIFIED = "owner-unverified"
    UNAUTHENTICATED_STATE = "unauthenticated-state"
    STALE_STATE = "stale-state"
    STATE_RESET = "state-reset"
    CHANGED_SINCE = "changed-since"
    OTHER_CLUSTER = "other-cluster"
    DEADLINE_EXCEEDED = "deadline-exceeded"
    TOO_MANY_UNKNOWN_PODS = "too-many-unknown-pods"
    INTERNAL_ERROR = "internal-error"
    CPU_BOUND = "cpu-bound"
    AT_MAX_CPU = "at-max-cpu"
    AT_MAX_MEMORY = "at-max-memory"
    BELOW_LIMIT_RANGE = "below-limit-range"
    RECENTLY_REVERTED = "recently-reverted"
    OPERATOR_FORBIDS = "operator-forbids"
    TEST_ALERT = "test-alert"
    IN_PLACE_UNAVAILABLE = "in-place-unavailable"
    REBALANCE_HELD = "rebalance-held"  # a receiver holding a donor's GPUs: nothing else changes until they go back
    UNCONFIRMED = "unconfirmed"  # (core/confirm.py) a firing alert Prometheus's rules do not fire now: never acted on
    STILL_FIRING = "still-firing"  # a resolve while Prometheus still fires the alert: nothing is reverted
    INVALID_ALERT = "invalid-alert"  # a malformed alert in a valid envelope: the others are decided


@dataclass(frozen=True, slots=True)
class Shortfall:
    """What a growth refused for lack of GPU quota misses: `need` GPUs of quota `quota`, which shows `headroom`.

    Set only by the GPU quota check (policy/quota.py), never by a CPU or memory quota line: rebalancing moves GPUs.
    """

    quota: str
    need: int
    headroom: int

    @property
    def gpus(self) -> int:
        """GPUs missing: what a donor must free in that quota."""
        return max(0, self.need - self.headroom)


@dataclass(frozen=True, slots=True)
class Considered:
    """One strategy the policy looked at, and why it did not apply (None when it did)."""

    strategy: str
    reason: SkipReason | None
    detail: str = ""
    shortfall: Shortfall | None = None  # QUOTA_EXCEEDED on a GPU quota line: which quota, how much


@dataclass(frozen=True, slots=True)
class Action:
    """A desired state ("set container `main` to 2 GPUs"), never a delta: applying it twice is a no-op.

    The act layer turns it into one patch of the owner (the change plus the reactor's
    bookkeeping annotations), so a decision never carries Kubernetes shapes.
    """

    action: str  # "resize-gpu" | "scale-replicas" | "set-priority" | "revert"
    direction: str  # "down" | "up" | "revert"
    workload: WorkloadRef
    container: str | None
    from_value: int | str | None
    to_value: int | str | None
    strategy: str
    considered: tuple[Considered, ...] = ()
    gpu_delta: int = 0  # GPUs requested per pod after minus before, times replicas (for metrics)
    # GPUs of each quota (by name) the change keeps once rolled out, where it grows: reserved for the rest
    # of the notification. A set-priority change takes every replica's GPUs in the new class's quota.
    quota_charges: tuple[tuple[str, int], ...] = ()
    cpu: ComputeResources | None = None  # resize-cpu (and its revert): the container's CPU to set
    cpu_before: ComputeResources | None = None  # ... and what it was (kept in `original` for the revert)
    memory: ComputeResources | None = None  # resize-memory (and its revert): the container's memory to set, bytes
    memory_before: ComputeResources | None = None  # ... and what it was
    # Where a CPU/memory change goes ("pods" | "template" | "both"); None: the policy's cpu.applyTo. A memory
    # raise on a container whose resizePolicy restarts it for memory goes to the template only.
    apply_to: str | None = None
    # Millicores (bytes) of each CPU (memory) quota line ((quota name, resource), as ComputeQuota.key) a raise
    # keeps: reserved for the rest of the notification, like `quota_charges`.
    compute_quota_charges: tuple[tuple[tuple[str, str], int], ...] = ()
    # What the engine adds to the decision's answer and log line, e.g. the rebalance that paid for a growth.
    note: str = ""
    # What the change does to the running pods beyond a rolling update (`OperatorFacts.effect`): in the Event too.
    effect: str = ""


@dataclass(frozen=True, slots=True)
class Skip:
    reason: SkipReason
    detail: str = ""
    considered: tuple[Considered, ...] = ()
    shortfall: Shortfall | None = None  # QUOTA_EXCEEDED on a GPU quota line (see `Shortfall`)


Decision = Action | Skip
