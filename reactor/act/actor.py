"""The act step: the only place that changes the cluster, and the protocol around each change.

For one workload: decide, spend one unit of the action budget, send one conditional patch that
carries the change and the reactor's state annotations together (so a change is never
half-written), and on a 409 re-read and re-decide, a bounded number of times. A unit spent on a
write that never happened is refunded, so failures cannot starve other workloads. After a write,
an Event on the workload for `kubectl describe`, queued (posting.py): never waited for. Pod GPU
resources and `priorityClassName` are immutable on running pods, so the patch always targets the
owner's pod template.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reactor.act.budget import Budget
from reactor.act.ledger import Ledger, StaleRecord, entry_for
from reactor.act.posting import EventPoster, workload_event
from reactor.act.resize import changes_compute, resize_pods
from reactor.cluster.kinds import Kinds
from reactor.cluster.kube import KubeGateway
from reactor.cluster.patches import effective_action
from reactor.core.errors import ConflictError, PermanentError, ReactorError, TemporaryError
from reactor.core.model import (
    Action,
    Decision,
    Mode,
    Result,
    Signal,
    Skip,
    SkipReason,
    Verification,
    Workload,
    WorkloadRef,
)
from reactor.integrations.adapters import Adapters
from reactor.integrations.kueue import PRIORITY_LABEL
from reactor.state.seal import new_write
from reactor.state.writes import KEEP, RebalanceWrite, StateWrites

log = logging.getLogger(__name__)

# Refusals a cached copy may cause where the API server's would not: confirmed on one fresh read.
_CONFIRM = (SkipReason.STALE_STATE, SkipReason.STATE_RESET)
EVENT_REASONS = {
    "resize-gpu": "GPUResized",
    "scale-replicas": "ReplicasScaled",
    "set-priority": "PriorityChanged",
    "revert": "ChangeReverted",
    "resize-cpu": "CPUResized",
    "resize-memory": "MemoryResized",
}


class KeptChanging(TemporaryError):
    """Every try met a 409: a 503 makes Alertmanager retry within seconds, not at the next group_interval."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the act step needs from the engine for one workload.

    `decide` turns the owner object as read into the workload value, its decision and the mode
    that applies; `reread` reads the owner again from the API (after a 409), None if it is gone.
    """

    ref: WorkloadRef
    signal: Signal
    decide: Callable[[dict[str, Any]], tuple[Workload, Decision, Mode]]
    reread: Callable[[], dict[str, Any] | None]
    # The verifier's revert of a stalled change: the verification it ends and why (recorded as `reverted`),
    # and the Event's reason.
    stalled: tuple[Verification, str] | None = None
    event_reason: str = ""
    # A rebalance's side (engine/rebalancing.py): the `rebalance` record the write leaves (KEEP: as read), and what the
    # Event adds, naming the other side.
    rebalance: RebalanceWrite = KEEP
    event_note: str = ""


@dataclass(frozen=True, slots=True)
class Acted:
    """What became of one workload: the decision, its result, and why a write failed (if it did)."""

    decision: Decision
    result: Result
    error: str = ""


class Actor:
    """Carries out decisions; holds the budget and the gateway, nothing about one notification."""

    def __init__(self, *, kube: KubeGateway, budget: Budget, gpu_resource: str, state: StateWrites,
                 events: EventPoster, conflict_retries: int, dry_run: bool, cpu_apply_to: str = "pods",
                 adapters: Adapters, ledger: Ledger | None = None, reverse_after: timedelta = timedelta(0)) -> None:
        self.kube, self.budget, self.state, self.cpu_apply_to = kube, budget, state, cpu_apply_to
        self.events = events  # Events are queued, never sent on the caller's thread (see posting.py)
        self.ledger, self.reverse_after = ledger, reverse_after  # the state ledger (act/ledger.py)
        self.adapters = adapters  # the enabled operators' kinds, written by JSON merge patch (see adapted.py)
        self.kinds = Kinds(adapters, gpu_resource)  # each kind's own patch (a lookup of values, no collaborator)
        self.gpu_resource = gpu_resource
        self.conflict_retries, self.dry_run = conflict_retries, dry_run

    def carry_out(self, attempt: Attempt, obj: dict[str, Any], now: datetime) -> Acted:
        """Decide and write, re-deciding after each 409; TemporaryError when conflicts outlast the retries."""
        spent = False
        try:
            confirmed = False
            for _ in range(self.conflict_retries + 1):
                workload, decision, mode = attempt.decide(obj)
                if isinstance(decision, Skip) and decision.reason in _CONFIRM and not confirmed:
                    # A replayed or removed record, as a cached copy shows it: the API server's copy decides.
                    confirmed, fresh = True, attempt.reread()
                    if fresh is not None:
                        workload, decision, mode = attempt.decide(obj := fresh)
                if isinstance(decision, Skip):
                    return Acted(decision, Result.SKIPPED)
                if self.dry_run or mode == Mode.RECOMMEND:
                    return Acted(decision, Result.RECOMMENDED)
                if not spent and not self.budget.try_spend(attempt.ref.namespace, now):
                    return Acted(Skip(SkipReason.BUDGET_EXHAUSTED, "the action budget for this window is spent"),
                                 Result.SKIPPED)
                spent = True
                try:
                    written = self._write(decision, workload, attempt, now, obj)
                except PermanentError as e:
                    return Acted(decision, Result.FAILED, str(e))
                if written is None:
                    fresh = attempt.reread()
                    if fresh is None:
                        return Acted(Skip(SkipReason.NOT_FOUND, f"{attempt.ref} was deleted"), Result.SKIPPED)
                    obj = fresh
                    continue
                spent = False  # kept: the write happened
                try:
                    resized = self._resize_pods(decision, workload, attempt.signal)
                except PermanentError as e:
                    return Acted(decision, Result.FAILED, str(e))
                reason = attempt.event_reason or EVENT_REASONS.get(decision.action, "GPUReactorAction")
                self.events.post(workload_event(attempt.ref, written, reason=reason, now=now,
                                                message=event_message(decision, attempt.signal) + resized
                                                + attempt.event_note))
                return Acted(decision, Result.APPLIED)
            raise KeptChanging(f"{attempt.ref} kept changing while the reactor acted "
                                 f"({self.conflict_retries + 1} conflicts)")
        finally:
            if spent:
                # Nothing was written with it (a lost race, a failed write): a spent unit would starve others.
                self.budget.refund(attempt.ref.namespace, now)

    def _write(self, action: Action, workload: Workload, attempt: Attempt, now: datetime,
               obj: dict[str, Any]) -> dict[str, Any] | None:
        """The conditional patch; the object as written, or None on a 409 (the read was stale)."""
        write = new_write()  # this record's identity, sealed into its MAC and named first in the ledger
        if attempt.stalled is not None:
            verification, why = attempt.stalled
            annotations = self.state.stalled_revert(action, attempt.signal, workload, now, verification, why,
                                                    write=write)
        else:
            annotations = self.state.change(action, attempt.signal, workload, now, write=write,
                                            rebalance=attempt.rebalance)
        ref = workload.ref
        if self.ledger is not None:  # first the ledger names the write, then the workload carries it
            try:
                self.ledger.begin(workload, workload.state.not_latest,
                                  entry_for(annotations, write, now, self.reverse_after), now)
            except StaleRecord:
                return None  # another replica wrote since: read the workload again and decide again
        try:
            return self.kube.patch(ref.kind, ref.namespace, ref.name, self._body(action, workload, annotations, obj),
                                   self.adapters.get(ref.kind))
        except ConflictError:
            self._abort(workload, write, now)
            return None
        except TemporaryError:
            self._settle(workload, write, now)
            raise
        except ReactorError:
            self._abort(workload, write, now)
            raise

    def _abort(self, workload: Workload, write: str, now: datetime) -> None:
        if self.ledger is not None:
            self.ledger.abort(workload.uid, write, now)

    def _settle(self, workload: Workload, write: str, now: datetime) -> None:
        """A patch whose fate is unknown (5xx, timeout): read the workload once. Still at the version the patch was
        conditional on, it did not land: the intent is undone. Carrying the write, it did. Anything else stays an
        intent (the old record counts only while the workload is at that version): the safe side of a guess."""
        if self.ledger is None:
            return
        ref = workload.ref
        try:
            obj = self.kube.get(ref.kind, ref.namespace, ref.name, self.adapters.get(ref.kind))
        except ReactorError:
            return
        meta = obj.get("metadata") or {}
        if str(meta.get("resourceVersion", "")) == workload.resource_version:
            self._abort(workload, write, now)

    def _body(self, action: Action, workload: Workload, annotations: dict[str, str | None],
              obj: dict[str, Any]) -> dict[str, Any]:
        """Kueue's label for a queued workload's priority, whatever its kind; else the kind's own patch (kinds.py)."""
        if workload.queue and effective_action(action, workload) == "set-priority":
            return queue_priority_patch(action, workload, annotations)
        return self.kinds.of(workload.ref.kind).patch(obj, workload, action, annotations,
                                                      cpu_apply_to=action.apply_to or self.cpu_apply_to)

    def _resize_pods(self, action: Action, workload: Workload, signal: Signal) -> str:
        """After the owner's patch recorded it: a CPU (memory) change in place on the named pods; their status, for
        the Event."""
        apply_to = action.apply_to or self.cpu_apply_to
        if not changes_compute(action, workload) or apply_to == "template":
            return ""
        return "; resized in place: " + ", ".join(resize_pods(self.kube, action, signal, only=apply_to == "pods"))


def queue_priority_patch(action: Action, workload: Workload, annotations: dict[str, str | None]) -> dict[str, Any]:
    """Kueue: the priority is the workload's priority-class label (a WorkloadPriorityClass), not its pods' class."""
    return {"metadata": {"resourceVersion": workload.resource_version, "annotations": annotations,
                         "labels": {PRIORITY_LABEL: action.to_value}}}


def event_message(action: Action, signal: Signal) -> str:
    """What changed and why, for the workload's owners. A step the reactor takes on its own (a rebalance's
    give-back or restore) has no measured value and no pods: it is named by what it is, never `value None`."""
    target = f"container {action.container} " if action.container else ""
    cause = f"on {signal.alert} ({signal.status}"
    cause += f", value {signal.value})" if signal.value is not None else ")"
    if signal.pods:
        cause += f" for pods {', '.join(signal.pods[:5])}"
    effect = f"; {action.effect}" if action.effect else ""
    return (f"gpu-reactor {action.action} ({action.strategy}): {target}{action.from_value} -> {action.to_value} "
            f"{cause}{effect}")
