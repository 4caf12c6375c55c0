"""Rebalancing, the receiver's side (`rebalance.enabled`; the pure verdicts in policy/rebalance.py).

A receiver alert refused for lack of GPU quota only asks the alert source (one call per receiver decision) which
workloads of the namespace idle now, decides each one as it would on its own alert, writes the first qualifying
donor's change through the act step, and grows the receiver once the quota's status shows the room — at once, or
from the rebalancer's pass (observe/rebalancer.py), which also gives the donor back (timeout, or the receiver's
resolve: givebacks.py).

Its port is narrow: the workload decider (decider.py) for every decision and write, the alert source for idle
donors, the waiting list, and the give-backs. It wraps the decider's steps for a receiver alert only; every other
alert never passes here.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reactor.act.actor import Acted
from reactor.act.posting import EventPoster, workload_event
from reactor.config.fields import format_duration
from reactor.core.confirm import Confirmer
from reactor.core.errors import AlertSourceUnavailable, PrometheusUnavailable
from reactor.core.firing import FiringAlerts
from reactor.core.metrics import Metrics
from reactor.core.model import (
    Action,
    Alert,
    Decision,
    Mode,
    Rebalance,
    Result,
    Shortfall,
    Signal,
    Skip,
    SkipReason,
    Status,
    Workload,
    WorkloadRef,
)
from reactor.engine.decider import ALREADY_APPLIED, WorkloadDecider
from reactor.engine.firings import WorkloadLocks
from reactor.engine.givebacks import GiveBacks, labels_of, step_owner, uid_of
from reactor.engine.metrics import EngineMetrics
from reactor.engine.namespace import Namespace
from reactor.engine.reads import Readers
from reactor.engine.refusals import owner_skip
from reactor.observe.rebalancer import GROW, Waiting, Waitlist
from reactor.policy import effective_mode, fold
from reactor.policy.rebalance import MAX_DONOR_PODS, Candidate, Verdict, no_donor, qualify, ranked
from reactor.policy.values import Policy
from reactor.resolve.owners import Owner, Owners, Reader, resolve_owner, valid_name
from reactor.state.annotations import signal_key

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Move:
    """One rebalance being made: the receiver refused, what it misses, and the namespace's facts so far."""

    owner: Owner
    signal: Signal
    skip: Skip
    receiver: Workload
    shortfall: Shortfall
    ns: Namespace
    now: datetime


class Rebalancing:
    """The receiver's side of a rebalance, and the steps the rebalancer's pass calls (`observe.rebalancer.Steps`)."""

    def __init__(self, *, policy: Policy, metrics: Metrics, decider: WorkloadDecider, events: EventPoster,
                 readers: Readers, owners: Owners, locks: WorkloadLocks, source: FiringAlerts | None,
                 waitlist: Waitlist, givebacks: GiveBacks, clock: Callable[[], datetime],
                 confirm: Confirmer | None = None,
                 on_applied: Callable[[list[WorkloadRef]], None] | None = None) -> None:
        self.policy, self.decider, self.events = policy, decider, events
        self.counts = EngineMetrics.of(metrics)
        self.readers, self.owners, self.locks, self.clock = readers, owners, locks, clock
        self.source = source  # None: no rebalance can run, and the refusal says so
        self.confirm = confirm  # Prometheus's word on each donor's idle alert (None: `confirm.enabled: false`)
        self.waitlist, self.givebacks = waitlist, givebacks
        self.adapters = decider.view.adapters
        self.on_applied = on_applied  # the verifier's `track`, as the notification path's

    def receives(self, signal: Signal) -> bool:
        return signal.alert in self.policy.rebalance_receiver_alerts

    def handle(self, reader: Reader, owner: Owner, signal: Signal, ns: Namespace, now: datetime,
               applied: list[WorkloadRef]) -> tuple[Decision, Result]:
        """A receiver alert: a repeat of one a donor already paid for grows from what was given; one refused for
        GPU quota only looks for a donor; a resolve gives the donor back."""
        firing = signal.status == Status.FIRING
        paid = self.waitlist.waiting_for(owner.ref) if firing else None
        if paid is not None:
            return self._grow_paid(reader, owner, paid, ns, now, applied, signal)
        if self.decider.already_applied(signal):
            return self.decider.finish_skip(owner.ref, signal, ALREADY_APPLIED)
        acted = self.decider.act(reader, owner, signal, ns, now, **self._resolving(reader, owner, firing))
        if firing and quota_short(acted.decision):
            assert isinstance(acted.decision, Skip) and acted.decision.shortfall is not None
            receiver = self.decider.workload(owner.obj, owner, reader)  # type: ignore[arg-type]
            acted = self._rebalance(reader, _Move(owner, signal, acted.decision, receiver,
                                                  acted.decision.shortfall, ns, now), applied)
        elif not firing and not self.policy.dry_run:
            self.givebacks.after_resolve(reader, owner, now)
        return self.decider.finish(owner.ref, signal, acted, ns, applied)

    # --- the rebalancer's pass (observe.rebalancer.Steps) ------------------------------------

    def grow(self, waiting: Waiting, now: datetime) -> bool:
        """A waiting receiver: decided again (every rail), applied when the quota fits."""
        reader = self.readers.new()
        owner = step_owner(reader, self.owners, waiting.receiver, waiting.receiver_pod, waiting.receiver_uid)
        if owner is None:
            return self.givebacks.give_back(waiting, now)  # the receiver is gone: nothing waits for the donor's GPUs
        applied: list[WorkloadRef] = []
        with self.locks.of(owner.ref):
            decision, result = self._grow_paid(reader, owner, waiting, Namespace(), now, applied,
                                               waiting.receiver_signal)
        if applied and self.on_applied is not None:
            self.on_applied(applied)
        if isinstance(decision, Skip):  # said with the give-back, if it comes to that
            self.waitlist.refused(waiting, f"{decision.reason.value}: {decision.detail}")
        return result is Result.APPLIED

    def give_back(self, waiting: Waiting, now: datetime) -> bool:
        return self.givebacks.give_back(waiting, now)

    def restore(self, waiting: Waiting, now: datetime) -> bool:
        return self.givebacks.restore(waiting, now)

    def expired(self, waiting: Waiting, now: datetime) -> None:
        self.givebacks.expired(waiting, now)

    def recover(self, now: datetime) -> list[Waiting]:
        return self.givebacks.recover(now)

    # --- finding and taking a donor ----------------------------------------------------------

    def _rebalance(self, reader: Reader, move: _Move, applied: list[WorkloadRef]) -> Acted:
        """The receiver's growth was refused for GPU quota only: find a donor, write its change first, then grow
        the receiver once the quota shows the room (now, if it already does; else the rebalancer waits for it)."""
        skip, shortfall, owner = move.skip, move.shortfall, move.owner
        if effective_mode(move.receiver, self.policy) is not Mode.ENFORCE:
            return Acted(skip, Result.SKIPPED)  # a receiver only recommended on moves nobody's GPUs
        if self.source is None:
            return self._unbalanced(skip, "no rebalance: no alert source shows idle donors "
                                          "(rebalance.alertmanagerUrl)", "source-unavailable")
        if self.waitlist.full():
            return self._unbalanced(skip, "no rebalance: too many rebalances wait already", "no-donor")
        try:
            alerts = self.source.firing(owner.ref.namespace, self.policy.rebalance_donor_alerts)
            if self.confirm is not None:  # a donor is idle only if Prometheus fires its idle alert: sized by its value
                alerts = [v.measured(a) for a, v in zip(alerts, self.confirm.confirm(alerts, move.now), strict=True)
                          if v.firing]
        except (AlertSourceUnavailable, PrometheusUnavailable) as e:
            return self._unbalanced(skip, f"no rebalance: the alert source is unavailable: {e.reason}",
                                    "source-unavailable")
        verdicts, donors = self._candidates(reader, alerts, move)
        order = ranked(verdicts)
        if not order:
            return self._unbalanced(skip, no_donor(verdicts), "no-donor")
        if self.policy.dry_run:  # `reactor plan`: the whole plan, both sides, and nothing written
            return self._planned(move, order[0], verdicts)
        lost: list[str] = []
        raced = False
        for verdict in order:
            donor_owner, donor_signal = donors[verdict.ref]
            acted = self._donate(reader, donor_owner, donor_signal, move, verdict)
            if acted.result is Result.APPLIED and isinstance(acted.decision, Action):
                break
            decision = acted.decision
            raced = raced or (isinstance(decision, Skip) and decision.reason in _TAKEN)
            why = f"{decision.reason.value}: {decision.detail}" if isinstance(decision, Skip) else acted.error
            lost.append(f"{verdict.ref.kind}/{verdict.ref.name}: {why}")
        else:
            return self._unbalanced(skip, "no donor gave: " + "; ".join(lost), "lost-race" if raced else "no-donor")
        given = replace(acted.decision, note=f"rebalance: gives {verdict.freed} GPUs of quota {shortfall.quota} to "
                                             f"{owner.ref.kind}/{owner.ref.name}")
        self.decider.finish_action(verdict.ref, donor_signal, given, Result.APPLIED)
        applied.append(verdict.ref)
        return self._wait_for_room(reader, move, verdict, donors[verdict.ref], acted.decision)

    def _planned(self, move: _Move, first: Verdict, verdicts: list[Verdict]) -> Acted:
        """What `reactor plan` shows of a rebalance: the donor first, then the receiver; nothing written."""
        skip, shortfall = move.skip, move.shortfall
        considered = "; ".join(v.line() for v in verdicts)
        grows = next((c.strategy for c in skip.considered if c.shortfall == shortfall), "its growth")
        return Acted(replace(skip, detail=(
            f"{skip.detail}; rebalance plan: first {first.ref.kind}/{first.ref.name}: {first.reason}; then this "
            f"workload: {grows} once quota {shortfall.quota} shows the room; donors considered: {considered}")),
            Result.SKIPPED)

    def _wait_for_room(self, reader: Reader, move: _Move, verdict: Verdict, donor: tuple[Owner, Signal],
                       given: Action) -> Acted:
        """The donor gave: the receiver grows now if the quota already shows the room, else it waits for it."""
        owner, signal, shortfall, now = move.owner, move.signal, move.shortfall, move.now
        donor_owner, donor_signal = donor
        waiting = Waiting(GROW, owner.ref, move.receiver.uid, signal.pods[0] if signal.pods else "", signal,
                          verdict.ref, donor_signal.pods[0] if donor_signal.pods else "", donor_signal, verdict.freed,
                          shortfall.quota, now + self.policy.verify_timeout, now + 2 * self.policy.verify_timeout,
                          since=now.replace(microsecond=0),  # as the sealed record keeps it (to the second)
                          donor_uid=uid_of(donor_owner.obj))
        if not reader.past_deadline():  # the quota may show the room already (pods deleted at once)
            grown = self._grow_now(owner, signal, waiting, now)
            if grown is not None:
                return grown
        self.waitlist.add(waiting)
        self.counts.rebalances.labels(result="pending").inc()
        note = (f"{verdict.ref.kind}/{verdict.ref.name} gave {verdict.freed} GPUs of quota {shortfall.quota} "
                f"({given.strategy} {given.from_value}→{given.to_value})")
        self.events.post(workload_event(owner.ref, owner.obj or {}, reason="RebalancePending", now=now, message=(
            f"gpu-reactor: {signal.alert} refused by quota {shortfall.quota}: {note}; this workload grows once the "
            f"quota shows the room, or the donor gets its GPUs back after "
            f"{format_duration(self.policy.verify_timeout)}")))
        return Acted(replace(move.skip, detail=f"{move.skip.detail}; rebalance: {note}; the growth waits for the "
                                               f"quota to show the room (until {waiting.deadline.isoformat()})"),
                     Result.SKIPPED)

    def _unbalanced(self, skip: Skip, why: str, result: str) -> Acted:
        self.counts.rebalances.labels(result=result).inc()
        return Acted(replace(skip, detail=f"{skip.detail}; {why}"), Result.SKIPPED)

    def _candidates(self, reader: Reader, alerts: Sequence[Alert],
                    move: _Move) -> tuple[list[Verdict], dict[WorkloadRef, tuple[Owner, Signal]]]:
        """A verdict for each workload the source shows idle (its pods resolved through the notification's Reader,
        at most MAX_DONOR_PODS distinct pods), and each one's owner and folded idle signal."""
        namespace, names = move.receiver.ref.namespace, self.policy.rebalance_donor_alerts
        # Only what was asked for is believed, whatever the source answered: firing, this namespace, a donor alert.
        alerts = [a for a in alerts if a.firing and a.namespace == namespace and a.name in names]
        pods = sorted({a.pod for a in alerts if a.pod and valid_name(a.pod)})
        verdicts: list[Verdict] = []
        if len(pods) > MAX_DONOR_PODS:
            verdicts.append(Verdict(WorkloadRef("Pod", namespace, pods[MAX_DONOR_PODS]), False,
                                    f"and {len(pods) - MAX_DONOR_PODS} more idle pods not looked at (at most "
                                    f"{MAX_DONOR_PODS} per decision)"))
            pods = pods[:MAX_DONOR_PODS]
        groups: dict[WorkloadRef, tuple[Owner, list[Alert]]] = {}
        by_pod: dict[str, list[Alert]] = defaultdict(list)
        for alert in alerts:
            if alert.pod in pods:
                by_pod[alert.pod].append(alert)
        with contextlib.suppress(Exception):  # each pod is then read alone below, and fails alone
            reader.prime_pods(namespace, {p for p in pods if self.owners.get(namespace, p) is None})
        for pod in pods:
            try:
                found = resolve_owner(reader, namespace, pod, self.owners)
            except Exception as e:  # noqa: BLE001 - a donor not readable is a donor not chosen, said in its verdict
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False, f"not resolved: {e}"))
                continue
            refused = owner_skip(by_pod[pod][0], found, self.adapters)
            if refused is not None or found is None:
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False,
                                        refused.detail if refused is not None else "not found"))
                continue
            groups.setdefault(found.ref, (found, []))[1].extend(by_pod[pod])
        bounds = move.ns.gpu_bounds(reader, namespace, self.policy.gpu_resource)
        donors: dict[WorkloadRef, tuple[Owner, Signal]] = {}
        for ref in sorted(groups):
            owner, group = groups[ref]
            assert owner.obj is not None
            signal = fold(group)
            workload, decision, mode = self.decider.decide(reader, owner.obj, owner, signal, move.ns, move.now)
            candidate = Candidate(workload, signal, labels_of(owner.obj), mode, decision)
            verdicts.append(qualify(candidate, receiver=move.receiver, shortfall=move.shortfall, bounds=bounds,
                                    policy=self.policy, now=move.now))
            donors[ref] = (owner, signal)
        return verdicts, donors

    def _donate(self, reader: Reader, owner: Owner, signal: Signal, move: _Move, verdict: Verdict) -> Acted:
        """The donor's own change, through the act step (conditional on what was read, its state sealed with the
        rebalance it gives to), qualified again on every re-read: a donor another receiver took meanwhile is in
        cooldown, or gives no more, and is refused."""
        ref, receiver, shortfall, ns, now = owner.ref, move.receiver, move.shortfall, move.ns, move.now
        record = Rebalance("donor", receiver.ref.kind, receiver.ref.name, receiver.uid, verdict.freed,
                           shortfall.quota, now)

        def decide_again(obj: dict[str, Any]) -> tuple[Workload, Decision, Mode]:
            workload, decision, mode = self.decider.decide(reader, obj, owner, signal, ns, now)
            if isinstance(decision, Action):
                bounds = ns.gpu_bounds(reader, ref.namespace, self.policy.gpu_resource)
                again = qualify(Candidate(workload, signal, labels_of(obj), mode, decision), receiver=receiver,
                                shortfall=shortfall, bounds=bounds, policy=self.policy, now=now)
                if not again.qualifies:
                    return workload, Skip(SkipReason.CONFLICT, f"no longer gives: {again.reason}"), mode
            return workload, decision, mode

        with self.locks.other(ref, held=receiver.ref) as locked:
            if not locked:
                return Acted(Skip(SkipReason.CONFLICT, "another decision holds the donor"), Result.SKIPPED)
            return self.decider.actor.carry_out(self.decider.attempt_of(
                reader, owner, signal, decide_again, rebalance=record, event_reason="RebalanceDonated",
                event_note=(f"; rebalance: gives {verdict.freed} GPUs of quota {shortfall.quota} to "
                            f"{receiver.ref.kind}/{receiver.ref.name}")), owner.obj, now)  # type: ignore[arg-type]

    # --- the receiver's growth ---------------------------------------------------------------

    def _grow_paid(self, reader: Reader, owner: Owner, waiting: Waiting, ns: Namespace, now: datetime,
                   applied: list[WorkloadRef], signal: Signal) -> tuple[Decision, Result]:
        """The receiver decided again once its donor gave (no rebalance from here again), recorded."""
        if self.decider.already_applied(signal):
            return self.decider.finish_skip(owner.ref, signal, ALREADY_APPLIED)
        grown = self.decider.act(reader, owner, signal, ns, now, **self._receiving(waiting, signal))
        acted = self._grew(waiting, grown)
        return self.decider.finish(owner.ref, signal, acted, ns, applied)

    def _resolving(self, reader: Reader, owner: Owner, firing: bool) -> dict[str, Any]:
        """A receiver's resolve undoes the growth a donor paid for (policy/revert.py) and, in the same write, drops
        its `receiver` record: from then on the donor's sealed record names a receiver that holds nothing of it, so
        a reactor that restarts before the donor is restored finds the donor owed (givebacks.py `recover`)."""
        if firing:
            return {}
        record = self.decider.workload(owner.obj, owner, reader).state.rebalance  # type: ignore[arg-type]
        return {"rebalance": None} if record is not None and record.role == "receiver" else {}

    def _receiving(self, waiting: Waiting, signal: Signal) -> dict[str, Any]:
        """The receiver's side of a rebalance, written with its growth: the firing the growth answers is named in
        it (`paid`), as the growth's `last-action` names it, so only that growth's resolve returns the donor's."""
        record = Rebalance("receiver", waiting.donor.kind, waiting.donor.name, waiting.donor_uid, waiting.gpus,
                           waiting.quota, self.clock(), paid=signal_key(signal))
        return {"rebalance": record, "event_reason": "RebalanceReceived",
                "event_note": f"; rebalance: {waiting.gpus} GPUs of quota {waiting.quota} given by "
                              f"{waiting.donor.kind}/{waiting.donor.name}"}

    def _grew(self, waiting: Waiting, acted: Acted) -> Acted:
        """A waiting growth decided again: applied ends the rebalance (moved)."""
        if acted.result is Result.APPLIED:
            self.waitlist.discard(waiting)
            return self._moved(acted, waiting)
        if isinstance(acted.decision, Skip) and acted.decision.reason is SkipReason.QUOTA_EXCEEDED:
            return Acted(replace(acted.decision, detail=(
                f"{acted.decision.detail}; rebalance: {waiting.donor.kind}/{waiting.donor.name} gave {waiting.gpus} "
                f"GPUs; the growth waits for the quota to show the room (until {waiting.deadline.isoformat()})")),
                acted.result)
        return acted

    def _grow_now(self, owner: Owner, signal: Signal, waiting: Waiting, now: datetime) -> Acted | None:
        """Right after the donor's write: the receiver decided again on the quota read now (a fresh Reader, so
        the API server's status.used, not the one read before the donor's change). None while it shows no room."""
        reader = self.readers.new()
        obj = reader.get(owner.ref.kind, owner.ref.namespace, owner.ref.name)
        if obj is None:
            return None
        acted = self.decider.act(reader, replace(owner, obj=obj), signal, Namespace(), now,
                                **self._receiving(waiting, signal))
        if acted.result is not Result.APPLIED:
            return None
        return self._moved(acted, waiting)

    def _moved(self, acted: Acted, waiting: Waiting) -> Acted:
        """The receiver grew: counted, and its answer and log line say which donor paid for it (not only the
        Events)."""
        self.counts.rebalances.labels(result="moved").inc()
        self.counts.rebalance_gpus_moved.inc(waiting.gpus)
        if not isinstance(acted.decision, Action):
            return acted
        return replace(acted, decision=replace(acted.decision, note=(
            f"rebalance: {waiting.donor.kind}/{waiting.donor.name} gave {waiting.gpus} GPUs of quota {waiting.quota}")))


# What a donor another receiver took meanwhile answers when asked again (its write conditional, its change recorded).
_TAKEN = frozenset({SkipReason.CONFLICT, SkipReason.COOLDOWN, SkipReason.ALREADY_APPLIED, SkipReason.HYSTERESIS,
                    SkipReason.ROLLOUT_IN_PROGRESS})


def quota_short(decision: Decision) -> bool:
    """Refused for lack of GPU quota only: the one refusal a rebalance answers."""
    return (isinstance(decision, Skip) and decision.reason is SkipReason.QUOTA_EXCEEDED
            and decision.shortfall is not None and decision.shortfall.gpus > 0)
