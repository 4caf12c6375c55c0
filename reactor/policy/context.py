"""The inputs of one decision, bundled, and the limits derived from them (GPU and replica ranges).

Pure values and arithmetic; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar, cast

from reactor.core.model import (
    Bounds,
    ComputeBounds,
    ComputeResources,
    Container,
    Kind,
    Mode,
    ReactorState,
    Signal,
    Skip,
    SkipReason,
    Workload,
)
from reactor.policy.values import Policy

_NO_LIMIT = 1 << 30
T = TypeVar("T")


# A namespace fact is given as its value, or as a reader the decision calls only when a strategy
# needs it: the common refusals (cooldown, already applied, rollout) then cost no API read at all.
Fact: TypeAlias = T | Callable[[], T]


@dataclass(frozen=True, slots=True)
class ComputeFacts:
    """The CPU and memory inputs, values or readers like the other facts: the namespace's CPU (memory) bounds,
    the CPU (memory) of each container of the (first) pod the alerts name, as it runs now, that pod's
    containers whose resizePolicy restarts them for a memory resize, and why the API server cannot resize a
    running pod (None: it serves pods/resize; read from the server's discovery, never from its version)."""

    bounds: Fact[ComputeBounds] = ComputeBounds()
    pods: Fact[Mapping[str, ComputeResources]] = field(default_factory=lambda: MappingProxyType({}))
    memory_bounds: Fact[ComputeBounds] = ComputeBounds()
    pod_memory: Fact[Mapping[str, ComputeResources]] = field(default_factory=lambda: MappingProxyType({}))
    memory_restarts: Fact[frozenset[str]] = frozenset()
    in_place_refusal: Fact[str | None] = None


class Context:
    """Everything `decide` was given, so each rail and strategy takes one argument.

    `bounds`, `priority_classes` and `hpa_managed` are read on first use and then remembered, so
    the policy is called once per workload and still reads only what the decision reaches.
    """

    __slots__ = ("signal", "workload", "policy", "now", "_facts", "_known")

    def __init__(self, signal: Signal, workload: Workload, bounds: Fact[Bounds], policy: Policy, now: datetime,
                 priority_classes: Fact[frozenset[str] | None] = None, hpa_managed: Fact[bool] | None = None,
                 cpu: ComputeFacts | None = None) -> None:
        self.signal, self.workload, self.policy, self.now = signal, workload, policy, now
        hpa: Fact[bool] = workload.hpa_managed if hpa_managed is None else hpa_managed
        cpu = cpu or ComputeFacts()
        self._facts: dict[str, object] = {"bounds": bounds, "priority_classes": priority_classes, "hpa_managed": hpa,
                                          "cpu_bounds": cpu.bounds, "pod_compute": cpu.pods,
                                          "memory_bounds": cpu.memory_bounds, "pod_memory": cpu.pod_memory,
                                          "memory_restarts": cpu.memory_restarts,
                                          "in_place_refusal": cpu.in_place_refusal}
        self._known: dict[str, object] = {}

    def _fact(self, name: str) -> Any:
        if name not in self._known:
            fact = self._facts[name]
            self._known[name] = fact() if callable(fact) else fact
        return self._known[name]

    @property
    def bounds(self) -> Bounds:
        """The namespace's LimitRange and quota numbers."""
        return cast(Bounds, self._fact("bounds"))

    @property
    def priority_classes(self) -> frozenset[str] | None:
        """The cluster's PriorityClass names; None: not known, the ladder is trusted."""
        return cast("frozenset[str] | None", self._fact("priority_classes"))

    @property
    def hpa_managed(self) -> bool:
        """Does an HPA (or KEDA through one) scale this workload horizontally?"""
        return bool(self._fact("hpa_managed"))

    @property
    def cpu_bounds(self) -> ComputeBounds:
        """The namespace's LimitRange and quota numbers for CPU."""
        return cast(ComputeBounds, self._fact("cpu_bounds"))

    @property
    def in_place_refusal(self) -> str | None:
        """Why a change cannot go to the running pods (the server serves no pods/resize); None when it can."""
        return cast("str | None", self._fact("in_place_refusal"))

    @property
    def cpu_apply_to(self) -> str:
        """Where a CPU (memory) change goes on this server: `cpu.applyTo`, except that `both` is the template
        alone where the server cannot resize running pods (the template's rollout was accepted anyway). `pods`
        stays `pods`: the strategies refuse it there by name (`in-place-unavailable`) rather than restart pods."""
        chosen = self.policy.cpu_apply_to
        if chosen == "both" and self.in_place_refusal is not None:
            return "template"
        return chosen

    def in_place_unavailable(self, apply_to: str) -> Skip | None:
        """IN_PLACE_UNAVAILABLE for a change that goes only to the running pods on a server that cannot resize
        them; None otherwise."""
        if apply_to != "pods" or self.in_place_refusal is None:
            return None
        return Skip(SkipReason.IN_PLACE_UNAVAILABLE, self.in_place_refusal)

    def container_compute(self, name: str) -> ComputeResources | None:
        """The container's CPU as the change will find it (see `_as_found`)."""
        return self._as_found(name, self.cpu_apply_to, "pod_compute", lambda container: container.cpu)

    @property
    def memory_bounds(self) -> ComputeBounds:
        """The namespace's LimitRange and quota numbers for memory (bytes)."""
        return cast(ComputeBounds, self._fact("memory_bounds"))

    def memory_apply_to(self, name: str) -> str:
        """Where a memory change of container `name` goes: `cpu.applyTo`, except that a container whose
        resizePolicy restarts it for memory is never resized in place (that is a restart): its template only."""
        if name in cast("frozenset[str]", self._fact("memory_restarts")):
            return "template"
        return self.cpu_apply_to

    def container_memory(self, name: str) -> ComputeResources | None:
        """The container's memory as the change will find it (see `_as_found`)."""
        return self._as_found(name, self.memory_apply_to(name), "pod_memory", lambda container: container.memory)

    def _as_found(self, name: str, apply_to: str, running: str,
                  in_template: Callable[[Container], ComputeResources | None]) -> ComputeResources | None:
        """Container `name`'s CPU or memory as a change going to `apply_to` will find it: on the running pod the
        alert names (the fact `running`) when the change goes to pods, as a pods-only raise leaves the template
        behind; else (or when that pod does not show the container) in the template."""
        if apply_to != "template":
            found = cast("Mapping[str, ComputeResources]", self._fact(running)).get(name)
            if found is not None:
                return found
        container = self.workload.container(name)
        return None if container is None else in_template(container)

    @property
    def state(self) -> ReactorState:
        return self.workload.state

    @property
    def cronjob(self) -> bool:
        return self.workload.ref.kind == Kind.CRONJOB.value

    @property
    def replicas(self) -> int:
        """Pods a template change affects; a CronJob's next run counts as one (parallelism ignored)."""
        if self.cronjob:
            return 1
        pods = self.workload.operator.pods_per_replica if self.workload.operator is not None else 1
        return (self.workload.replicas or 0) * max(1, pods)

    @property
    def surge(self) -> int:
        """Extra pods a template change creates while the old ones still count against quota."""
        return 0 if self.cronjob else max(0, self.workload.max_surge)  # pods (adapters multiply by pods per replica)


def effective_mode(workload: Workload, policy: Policy) -> Mode:
    """The workload's `mode` annotation, else the policy's default (an invalid one reads as unset); never more
    than `recommend` where the link to it cannot be confirmed from its owner's side (`OperatorFacts.recommend_only`)."""
    mode = workload.state.mode or policy.default_mode
    recommend_only = workload.operator is not None and workload.operator.recommend_only
    return Mode.RECOMMEND if recommend_only and mode == Mode.ENFORCE else mode


def gpu_range(ctx: Context) -> tuple[int, int]:
    """(lowest, highest) GPUs a container may be set to.

    Annotations only tighten the policy, and are first clamped into the LimitRange: the API
    server rejects pods outside it, so no annotation may lead the reactor there.
    """
    lr_min, lr_max = ctx.bounds.min_gpus, ctx.bounds.max_gpus
    ann_min, ann_max = _inside(ctx.state.min_gpus, lr_min, lr_max), _inside(ctx.state.max_gpus, lr_min, lr_max)
    lo = max(1, ctx.policy.min_gpus, ann_min or 0, lr_min or 0)
    hi = min(ctx.policy.max_gpus, _or_none(ann_max), _or_none(lr_max))
    return lo, hi


def replica_range(ctx: Context) -> tuple[int, int]:
    """(lowest, highest) replicas for this workload.

    `min-replicas` replaces the policy's floor (down to 0: scaling to zero is something the team can
    do itself); `max-replicas` only lowers the policy's ceiling, never raises it.
    """
    state, policy = ctx.state, ctx.policy
    lo = policy.min_replicas if state.min_replicas is None else state.min_replicas
    hi = policy.max_replicas if state.max_replicas is None else min(state.max_replicas, policy.max_replicas)
    return lo, hi


def _inside(value: int | None, lo: int | None, hi: int | None) -> int | None:
    if value is None:
        return None
    if hi is not None:
        value = min(value, hi)
    if lo is not None:
        value = max(value, lo)
    return value


def _or_none(value: int | None) -> int:
    return _NO_LIMIT if value is None else value
