"""One workload: read → decide → act → record, for the notification path and the rebalancing steps alike.

The decision is the pure policy's (reactor/policy); the write is the act step's (reactor/act/actor.py), which
re-reads and re-decides through `decide` on a conflict. This holds what a decision needs around those two: the
workload as the policy sees it (its state authenticated, remembered by resourceVersion, judged against the
ledger), the namespace's facts as readers the policy calls only if a strategy needs them, and the record of the
result (metrics, a log line, the dedup of firings).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from reactor.act.actor import Acted, Actor, Attempt
from reactor.act.ledger import Ledger
from reactor.act.posting import EventPoster, workload_event
from reactor.act.recording import Recorder
from reactor.act.resize import compute_facts, cpu_bounds, memory_bounds
from reactor.cluster.view import ClusterView
from reactor.cluster.workloads import hpa_targets
from reactor.core.alerts import Status
from reactor.core.bounds import Bounds, ComputeBounds
from reactor.core.model import Action, Decision, Mode, Result, Signal, Skip, SkipReason, Workload, WorkloadRef
from reactor.engine.firings import Firings
from reactor.engine.namespace import Namespace
from reactor.policy import decide, decide_given_back, effective_mode
from reactor.policy.values import Policy
from reactor.resolve.owners import Owner, Reader
from reactor.state.seal import StateKeys

WORKLOAD_MEMO = 1024  # workloads remembered as read, by resourceVersion (see `workload`)
ALREADY_APPLIED = Skip(SkipReason.ALREADY_APPLIED, "this firing was already acted on")


class WorkloadDecider:
    """Decides and acts for one workload at a time (the caller holds its lock); safe across threads."""

    def __init__(self, *, policy: Policy, actor: Actor, view: ClusterView, recorder: Recorder, events: EventPoster,
                 firings: Firings, ledger: Ledger | None, state_keys: StateKeys | None) -> None:
        self.policy, self.actor, self.view, self.recorder, self.events = policy, actor, view, recorder, events
        self.firings, self.ledger, self.state_keys = firings, ledger, state_keys
        self._lock = threading.Lock()
        self._workloads: OrderedDict[tuple[Any, ...], Workload] = OrderedDict()  # see `workload`
        self._refusals: OrderedDict[tuple[Any, ...], None] = OrderedDict()  # see `_refusal_event`

    def handle(self, reader: Reader, owner: Owner, signal: Signal, ns: Namespace, now: datetime,
               applied: list[WorkloadRef]) -> tuple[Decision, Result]:
        """Decide and act for `owner` on `signal`, and record it; a change applied is added to `applied`."""
        if self.already_applied(signal):
            return self.finish_skip(owner.ref, signal, ALREADY_APPLIED)
        return self.finish(owner.ref, signal, self.act(reader, owner, signal, ns, now), ns, applied)

    def already_applied(self, signal: Signal) -> bool:
        """Another thread of this process acted on this firing while this one waited for the workload."""
        return signal.status == Status.FIRING and self.firings.seen(signal.keys)

    def act(self, reader: Reader, owner: Owner, signal: Signal, ns: Namespace, now: datetime,
            **attempt: Any) -> Acted:
        """The act step's attempt for `owner` (`attempt`: what a rebalance adds to it), decided on `owner.obj`."""
        assert owner.obj is not None
        tried = self.attempt_of(reader, owner, signal, lambda obj: self.decide(reader, obj, owner, signal, ns, now),
                                **attempt)
        return self.actor.carry_out(tried, owner.obj, now)

    @staticmethod
    def attempt_of(reader: Reader, owner: Owner, signal: Signal,
                   decide: Callable[[dict[str, Any]], tuple[Workload, Decision, Mode]], **attempt: Any) -> Attempt:
        """An attempt for the act step, re-read past the notification's shared copy on a conflict."""
        return Attempt(owner.ref, signal, decide, rereader(reader, owner.ref), **attempt)

    def decide(
        self, reader: Reader, obj: dict[str, Any], owner: Owner, signal: Signal, ns: Namespace, now: datetime,
        *, given_back: str | None = None,
    ) -> tuple[Workload, Decision, Mode]:
        """One call of the policy; the namespace facts are readers it calls only if a strategy needs them.
        `given_back`: the receiver's uid, to ask whether a rebalance's donor gets back what it gave instead."""
        ref = owner.ref
        workload = self.workload(obj, owner, reader)
        if self.ledger is not None:  # never memoized: the ledger moves on without the workload changing
            workload = self.ledger.judge(workload, now)

        def bounds() -> Bounds:
            namespaced = ns.gpu_bounds(reader, ref.namespace, self.policy.gpu_resource)
            if not workload.queue:
                return namespaced
            return self.view.queue_bounds(namespaced, workload, reader)

        def cpu_namespace_bounds() -> ComputeBounds:
            if ns.cpu_bounds is None:
                ns.cpu_bounds = cpu_bounds(reader, ref.namespace)
            return ns.cpu_bounds.reserving(ns.compute_reserved)

        def memory_namespace_bounds() -> ComputeBounds:
            if ns.memory_bounds is None:
                ns.memory_bounds = memory_bounds(reader, ref.namespace)
            return ns.memory_bounds.reserving(ns.compute_reserved)

        def hpa_managed() -> bool:
            return (ref.kind, ref.name) in hpa_targets(reader.list_objects("HorizontalPodAutoscaler", ref.namespace))

        classes = reader.workload_priority_classes if workload.queue else reader.priority_classes
        cpu = compute_facts(reader, ref.namespace, signal, bounds=cpu_namespace_bounds, memory=memory_namespace_bounds)
        if given_back is not None:
            decision = decide_given_back(signal, workload, bounds, self.policy, now, given_back,
                                         priority_classes=classes, hpa_managed=hpa_managed, cpu=cpu)
        else:
            decision = decide(signal, workload, bounds, self.policy, now, priority_classes=classes,
                              hpa_managed=hpa_managed, cpu=cpu)
        if isinstance(decision, Skip) and decision.reason is SkipReason.OPERATOR_FORBIDS:
            self._refusal_event(obj, workload, signal, decision, now)
        return workload, decision, effective_mode(workload, self.policy)

    def workload(self, obj: dict[str, Any], owner: Owner, reader: Reader) -> Workload:
        """The workload as the policy sees it (its state authenticated), remembered by resourceVersion.

        The API server gives each version of an object its own resourceVersion, so the same (workload, uid,
        resourceVersion) always reads the same: on the cooldown path, where every notification meets an
        unchanged workload, neither the object is read again nor its state's MAC recomputed. An operator's
        resource (read through its adapter and child) and an object without a version are read every time.
        """
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version or owner.child is not None or self.view.adapters.get(owner.ref.kind) is not None:
            return self._view(obj, owner, reader)
        generation = self.state_keys.generation if self.state_keys is not None else -1  # a verdict dies with its key
        key = (owner.ref, str(meta.get("uid", "")), str(version), owner.via, owner.part, generation)
        # Read without the lock and not reordered (as `Owners.get`, reactor/resolve/owners.py): asked by every
        # notification, a lock here blocked every request thread whenever its holder was switched out. Entries leave
        # in the order they came; a workload evicted while still in use is read again once.
        known = self._workloads.get(key)
        if known is not None:
            return known
        workload = self._view(obj, owner, reader)
        with self._lock:
            self._workloads[key] = workload
            while len(self._workloads) > WORKLOAD_MEMO:
                self._workloads.popitem(last=False)
        return workload

    def finish(self, ref: WorkloadRef, signal: Signal, acted: Acted, ns: Namespace,
               applied: list[WorkloadRef]) -> tuple[Decision, Result]:
        """Record what the act step did; an applied change reserves its quota for the notification's others."""
        decision = acted.decision
        if isinstance(decision, Skip):
            return self.finish_skip(ref, signal, decision)
        if acted.result is Result.FAILED:
            self.recorder.action(ref, signal, decision, Result.FAILED, acted.error)
            return Skip(SkipReason.API_ERROR, acted.error), Result.FAILED
        if acted.result is Result.APPLIED:
            ns.reserve(decision)
            if decision.action != "revert":
                applied.append(ref)  # to verify: handed to the verifier with the notification's others
        return self.finish_action(ref, signal, decision, acted.result)

    def finish_skip(self, ref: WorkloadRef, signal: Signal, skip: Skip) -> tuple[Skip, Result]:
        self.recorder.skip(ref, signal, skip)
        if skip.reason is SkipReason.ALREADY_APPLIED:
            self.firings.remember(signal.keys)
        return skip, Result.SKIPPED

    def finish_action(self, ref: WorkloadRef, signal: Signal, action: Action, result: Result) -> tuple[Action, Result]:
        self.recorder.action(ref, signal, action, result, action.note)
        if result is Result.APPLIED and signal.status == Status.FIRING:
            self.firings.remember(signal.keys)
        return action, result

    def _view(self, obj: dict[str, Any], owner: Owner, reader: Reader) -> Workload:
        return self.view.workload(obj, owner.ref.kind, part=owner.part, child=owner.child, via=owner.via,
                                  kueue_label_mutable=reader.kueue_label_mutable)

    def _refusal_event(self, obj: dict[str, Any], workload: Workload, signal: Signal, skip: Skip,
                       now: datetime) -> None:
        """A change the operator would refuse or never carry to a pod is said where its owners look: a Warning
        Event `OperatorForbids` on the resource, once per resource version and reason (a firing alert repeats
        every group interval; the Event does not). Never in dry run (`reactor plan` prints the refusal)."""
        if self.policy.dry_run or signal.status != Status.FIRING:
            return
        key = (workload.ref, workload.uid, workload.resource_version, skip.detail)
        with self._lock:
            if key in self._refusals:
                return
            self._refusals[key] = None
            while len(self._refusals) > WORKLOAD_MEMO:
                self._refusals.popitem(last=False)
        self.events.post(workload_event(workload.ref, obj, reason="OperatorForbids", warning=True, now=now,
                                        message=f"gpu-reactor: {signal.alert} not acted on: {skip.detail}"))


def rereader(reader: Reader, ref: WorkloadRef) -> Callable[[], dict[str, Any] | None]:
    """How the act step reads `ref` again after a conflict: past the notification's shared copy."""
    def reread() -> dict[str, Any] | None:
        reader.forget(ref.kind, ref.namespace, ref.name)
        return reader.get(ref.kind, ref.namespace, ref.name)
    return reread
