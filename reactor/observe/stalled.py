"""A change whose rollout stalled is reverted to the recorded original, through the act step.

The same bounded, conditional, sealed write as any action; the decision is the policy's `decide_stalled`. It is
recorded as `reverted` with the reason, a `RolloutStalled` Warning and an `ActionReverted` Event. A revert that
cannot be applied (refused by the policy, the budget or the API server) is recorded once — one `RolloutStalled`
Warning, which later tries only count up (act/posting.py's correlator) — and tried again with the one backoff
(core/backoff.py), not every pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reactor.act.actor import Acted, Actor, Attempt
from reactor.act.posting import EventPoster, workload_event
from reactor.act.resize import compute_facts
from reactor.cluster.kube import KubeGateway, NotFound
from reactor.cluster.rollout import Progress
from reactor.cluster.view import ClusterView
from reactor.cluster.workloads import namespace_bounds
from reactor.core.alerts import Status
from reactor.core.backoff import doubling
from reactor.core.errors import TemporaryError
from reactor.core.metrics import Metrics
from reactor.core.model import Decision, Mode, Result, Signal, Skip, SkipReason, Verification, Workload, WorkloadRef
from reactor.observe.metrics import ObserveMetrics
from reactor.policy import decide_stalled, effective_mode
from reactor.policy.values import Policy
from reactor.resolve.owners import Reader
from reactor.state.annotations import format_time

log = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(minutes=10)  # the longest wait between two tries of a refused revert


@dataclass(frozen=True, slots=True)
class _Retry:
    """A revert that could not be applied: how many tries so far, and when the next one may run."""

    tries: int
    at: datetime


class StalledReverts:
    def __init__(self, *, policy: Policy, kube: KubeGateway, actor: Actor, view: ClusterView, events: EventPoster,
                 metrics: Metrics) -> None:
        self.policy, self.kube, self.actor, self.view, self.events = policy, kube, actor, view, events
        self.counts = ObserveMetrics.of(metrics)  # observe/metrics.py
        self._retries: dict[WorkloadRef, _Retry] = {}  # refused reverts, waiting out their backoff

    def waiting(self, ref: WorkloadRef, now: datetime) -> bool:
        """A refused revert of `ref` waits out its backoff: no read, no write before then."""
        retry = self._retries.get(ref)
        return retry is not None and now < retry.at

    def forget(self, ref: WorkloadRef) -> None:
        self._retries.pop(ref, None)

    def revert(self, obj: dict[str, Any], workload: Workload, verification: Verification, state: Progress,
               now: datetime) -> tuple[bool, str]:
        """(applied, why the rollout stalled)."""
        ref = workload.ref
        reason = f"rollout stalled for {self.policy.verify_timeout}: {state.trouble}"[:256]
        # An in-place change names the pods it did not reach: the revert resizes those back.
        signal = Signal(alert="RolloutStalled", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint="rollout-stalled", starts_at=format_time(verification.since), pods=state.pods)
        attempt = Attempt(ref, signal, lambda o: self._decide(ref, o, signal, now, workload.part),
                          lambda: reread(self.kube, self.view, ref), stalled=(verification, reason),
                          event_reason="ActionReverted")
        try:
            acted = self.actor.carry_out(attempt, obj, now)
        except TemporaryError as e:  # kept changing, or the API server failed: refused for now, like the rest
            acted = Acted(Skip(SkipReason.API_ERROR, str(e)), Result.FAILED, str(e))
        message = f"gpu-reactor: {verification.strategy} {reason}"
        if acted.result is Result.APPLIED:
            self.stalled_event(ref, obj, f"{message}; reverted to the recorded original", now)
            return True, reason
        self._refused(ref, obj, acted, message, now)
        return False, reason

    def stalled_event(self, ref: WorkloadRef, obj: dict[str, Any], message: str, now: datetime) -> None:
        self.events.post(workload_event(ref, obj, reason="RolloutStalled", message=message, now=now, warning=True))

    def _refused(self, ref: WorkloadRef, obj: dict[str, Any], acted: Acted, message: str, now: datetime) -> None:
        """A revert that could not be applied: one Warning (repeats count on it), the next try after a backoff
        that doubles from `verify.interval` up to MAX_BACKOFF."""
        decision = acted.decision
        why = acted.error or (f"{decision.reason.value}: {decision.detail}" if isinstance(decision, Skip)
                              else acted.result.value)
        retry = self._retries.get(ref)
        tries = 1 if retry is None else retry.tries + 1
        delay = timedelta(seconds=doubling(tries - 1, first=self.policy.verify_interval.total_seconds(),
                                           cap=MAX_BACKOFF.total_seconds()))
        self._retries[ref] = _Retry(tries, now + delay)
        self.stalled_event(ref, obj, f"{message}; the revert could not be applied ({why[:300]}); "
                                     "tried again with backoff", now)
        if tries == 1:
            self.counts.verifications.labels(result="revert-refused").inc()
        log.log(logging.WARNING if tries == 1 else logging.INFO, "stalled rollout not reverted",
                extra={"workload": str(ref), "result": acted.result.value, "detail": why[:500], "tries": tries,
                       "next": (now + delay).isoformat()})

    def _decide(self, ref: WorkloadRef, obj: dict[str, Any], signal: Signal, now: datetime,
                part: str) -> tuple[Workload, Decision, Mode]:
        workload = judged(self.actor, self.view.workload(obj, ref.kind, part=part), now)
        reader = Reader(self.kube, adapters=self.view.adapters)
        gpu = self.policy.gpu_resource
        decision: Decision = decide_stalled(
            signal, workload, lambda: self.view.queue_bounds(namespace_bounds(reader, ref.namespace, gpu), workload,
                                                             reader),
            self.policy, now,
            priority_classes=reader.workload_priority_classes if workload.queue else reader.priority_classes,
            cpu=compute_facts(reader, ref.namespace, signal))
        return workload, decision, effective_mode(workload, self.policy)


def reread(kube: KubeGateway, view: ClusterView, ref: WorkloadRef) -> dict[str, Any] | None:
    """`ref` read from the API server (never the cache: what the reactor just wrote must be seen); None when gone."""
    try:
        return kube.get(ref.kind, ref.namespace, ref.name, view.adapter(ref.kind))
    except NotFound:
        return None


def judged(actor: Actor, workload: Workload, now: datetime) -> Workload:
    """The workload with the reactor's own record (state ledger): a replayed, removed or edited one is replaced by
    the ledger's copy while that copy is live, so the verifier follows the change the reactor made, whatever a tenant
    put on the workload since (state/ledger_codec.py `judged`)."""
    ledger = actor.ledger
    return workload if ledger is None else ledger.judge(workload, now)
