"""Rebalancing, the engine's side (`rebalance.enabled`; the pure verdicts in policy/rebalance.py).

A receiver alert refused for lack of GPU quota only asks the alert source (`firing`, one call per receiver decision)
which workloads of the namespace idle now, decides each one as it would on its own alert, writes the first qualifying
donor's change through the act step, and grows the receiver once the quota's status shows the room — at once, or
from the rebalancer's pass (observe/rebalancer.py), which also gives the donor back (timeout, or the receiver's
resolve).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reactor.act.actor import Acted, Actor, Attempt
from reactor.act.posting import EventPoster, workload_event
from reactor.act.recording import Recorder
from reactor.cluster.cache import Miss, Store
from reactor.cluster.kube import KubeGateway
from reactor.cluster.view import ClusterView
from reactor.config.fields import format_duration
from reactor.config.settings import Settings
from reactor.core.confirm import Confirmer
from reactor.core.errors import AlertSourceUnavailable, PrometheusUnavailable
from reactor.core.firing import FiringAlerts
from reactor.core.metrics import Metrics
from reactor.core.model import (
    PATCHABLE_KINDS,
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
from reactor.engine.namespace import Namespace
from reactor.engine.refusals import owner_skip
from reactor.integrations.adapters import Adapters
from reactor.observe.rebalancer import GIVE_BACK, GROW, RESTORE, Rebalancer, Waiting
from reactor.policy import effective_mode, fold
from reactor.policy.rebalance import MAX_DONOR_PODS, Candidate, Verdict, no_donor, qualify, ranked
from reactor.policy.values import Policy
from reactor.resolve.owners import Owner, Owners, Reader, resolve_owner, valid_name
from reactor.state.annotations import REBALANCE

log = logging.getLogger(__name__)


class Rebalancing:
    """The engine's rebalancing steps (a mixin of `Engine`): what a quota-refused receiver, its donor and the
    rebalancer's waiting steps do. The pure choice is policy/rebalance.py; the waiting is observe/rebalancer.py."""

    if TYPE_CHECKING:  # what the steps use of the engine they are part of (engine/core.py)
        settings: Settings
        policy: Policy
        metrics: Metrics
        kube: KubeGateway
        adapters: Adapters
        actor: Actor
        events: EventPoster
        recorder: Recorder
        cache: Store | None
        firing: FiringAlerts | None
        confirm: Confirmer | None
        rebalancer: Rebalancer
        clock: Callable[[], datetime]
        monotonic: Callable[[], float]
        on_applied: Callable[[list[WorkloadRef]], None] | None
        _lock: threading.Lock
        _workload_locks: tuple[threading.Lock, ...]
        _grow_refusals: dict[tuple[str, WorkloadRef, WorkloadRef], str]
        _owners: Owners
        _orphans_given_up: set[tuple[WorkloadRef, str, datetime]]
        view: ClusterView

        def _decide(self, reader: Reader, obj: dict[str, Any], owner: Owner, signal: Signal, ns: Namespace,
                    now: datetime, *, given_back: str | None = None) -> tuple[Workload, Decision, Mode]: ...

        def _workload(self, obj: dict[str, Any], owner: Owner, reader: Reader) -> Workload: ...

        def _handle_workload(self, reader: Reader, owner: Owner, signal: Signal, ns: Namespace, now: datetime,
                             applied: list[WorkloadRef], *, grow: Waiting | None = None) -> tuple[Decision, Result]: ...

        def _finish_action(self, ref: WorkloadRef, signal: Signal, action: Action,
                           result: Result) -> tuple[Action, Result]: ...

        def _reader(self) -> Reader: ...

        @staticmethod
        def _rereader(reader: Reader, ref: WorkloadRef) -> Callable[[], dict[str, Any] | None]: ...


    def _receives(self, signal: Signal) -> bool:
        return self.policy.rebalance_enabled and signal.alert in self.policy.rebalance_receiver_alerts

    def _rebalance(self, reader: Reader, owner: Owner, signal: Signal, skip: Skip, ns: Namespace, now: datetime,
                   applied: list[WorkloadRef]) -> Acted:
        """The receiver's growth was refused for GPU quota only: find a donor, write its change first, then grow
        the receiver once the quota shows the room (now, if it already does; else the rebalancer waits for it)."""
        assert skip.shortfall is not None and owner.obj is not None
        shortfall, namespace = skip.shortfall, owner.ref.namespace
        receiver = self._workload(owner.obj, owner, reader)
        if effective_mode(receiver, self.policy) is not Mode.ENFORCE:
            return Acted(skip, Result.SKIPPED)  # a receiver only recommended on moves nobody's GPUs
        if self.firing is None:
            return self._unbalanced(skip, "no rebalance: no alert source shows idle donors "
                                          "(rebalance.alertmanagerUrl)", "source-unavailable")
        if self.rebalancer.full():
            return self._unbalanced(skip, "no rebalance: too many rebalances wait already", "no-donor")
        try:
            alerts = self.firing.firing(namespace, self.policy.rebalance_donor_alerts)
            if self.confirm is not None:  # a donor is idle only if Prometheus fires its idle alert: sized by its value
                alerts = [v.measured(a) for a, v in zip(alerts, self.confirm.confirm(alerts, now), strict=True)
                          if v.firing]
        except (AlertSourceUnavailable, PrometheusUnavailable) as e:
            return self._unbalanced(skip, f"no rebalance: the alert source is unavailable: {e.reason}",
                                    "source-unavailable")
        verdicts, donors = self._candidates(reader, alerts, receiver, shortfall, ns, now)
        order = ranked(verdicts)
        if not order:
            return self._unbalanced(skip, no_donor(verdicts), "no-donor")
        considered = "; ".join(v.line() for v in verdicts)
        if self.policy.dry_run:  # `reactor plan`: the whole plan, both sides, and nothing written
            first = order[0]
            grows = next((c.strategy for c in skip.considered if c.shortfall == shortfall), "its growth")
            return Acted(replace(skip, detail=(
                f"{skip.detail}; rebalance plan: first {first.ref.kind}/{first.ref.name}: {first.reason}; then this "
                f"workload: {grows} once quota {shortfall.quota} shows the room; donors considered: {considered}")),
                Result.SKIPPED)
        lost: list[str] = []
        raced = False
        for verdict in order:
            donor_owner, donor_signal = donors[verdict.ref]
            acted = self._donate(reader, donor_owner, donor_signal, receiver, shortfall, verdict, ns, now)
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
        self._finish_action(verdict.ref, donor_signal, given, Result.APPLIED)
        applied.append(verdict.ref)
        waiting = Waiting(GROW, owner.ref, receiver.uid, signal.pods[0] if signal.pods else "", signal, verdict.ref,
                          donor_signal.pods[0] if donor_signal.pods else "", donor_signal, verdict.freed,
                          shortfall.quota, now + self.policy.verify_timeout, now + 2 * self.policy.verify_timeout,
                          since=now.replace(microsecond=0),  # as the sealed record keeps it (to the second)
                          donor_uid=_uid(donors[verdict.ref][0].obj))
        if not reader.past_deadline():  # the quota may show the room already (pods deleted at once)
            grown = self._grow_now(owner, signal, waiting, now)
            if grown is not None:
                return grown
        self.rebalancer.add(waiting)
        self.metrics.rebalances.labels(result="pending").inc()
        note = (f"{verdict.ref.kind}/{verdict.ref.name} gave {verdict.freed} GPUs of quota {shortfall.quota} "
                f"({acted.decision.strategy} {acted.decision.from_value}→{acted.decision.to_value})")
        self.events.post(workload_event(owner.ref, owner.obj, reason="RebalancePending", now=now, message=(
            f"gpu-reactor: {signal.alert} refused by quota {shortfall.quota}: {note}; this workload grows once the "
            f"quota shows the room, or the donor gets its GPUs back after "
            f"{format_duration(self.policy.verify_timeout)}")))
        return Acted(replace(skip, detail=f"{skip.detail}; rebalance: {note}; the growth waits for the quota to show "
                                          f"the room (until {waiting.deadline.isoformat()})"), Result.SKIPPED)

    def _unbalanced(self, skip: Skip, why: str, result: str) -> Acted:
        self.metrics.rebalances.labels(result=result).inc()
        return Acted(replace(skip, detail=f"{skip.detail}; {why}"), Result.SKIPPED)

    def _candidates(self, reader: Reader, alerts: Sequence[Alert], receiver: Workload, shortfall: Shortfall,
                    ns: Namespace, now: datetime) -> tuple[list[Verdict], dict[WorkloadRef, tuple[Owner, Signal]]]:
        """A verdict for each workload the source shows idle (its pods resolved through the notification's Reader,
        at most MAX_DONOR_PODS distinct pods), and each one's owner and folded idle signal."""
        namespace, names = receiver.ref.namespace, self.policy.rebalance_donor_alerts
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
            reader.prime_pods(namespace, {p for p in pods if self._owners.get(namespace, p) is None})
        for pod in pods:
            try:
                found = resolve_owner(reader, namespace, pod, self._owners)
            except Exception as e:  # noqa: BLE001 - a donor not readable is a donor not chosen, said in its verdict
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False, f"not resolved: {e}"))
                continue
            refused = owner_skip(by_pod[pod][0], found, self.adapters)
            if refused is not None or found is None:
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False,
                                        refused.detail if refused is not None else "not found"))
                continue
            groups.setdefault(found.ref, (found, []))[1].extend(by_pod[pod])
        bounds = ns.gpu_bounds(reader, namespace, self.policy.gpu_resource)
        donors: dict[WorkloadRef, tuple[Owner, Signal]] = {}
        for ref in sorted(groups):
            owner, group = groups[ref]
            assert owner.obj is not None
            signal = fold(group)
            workload, decision, mode = self._decide(reader, owner.obj, owner, signal, ns, now)
            candidate = Candidate(workload, signal, _labels(owner.obj), mode, decision)
            verdicts.append(qualify(candidate, receiver=receiver, shortfall=shortfall, bounds=bounds,
                                    policy=self.policy, now=now))
            donors[ref] = (owner, signal)
        return verdicts, donors

    def _donate(self, reader: Reader, owner: Owner, signal: Signal, receiver: Workload, shortfall: Shortfall,
                verdict: Verdict, ns: Namespace, now: datetime) -> Acted:
        """The donor's own change, through the act step (conditional on what was read, its state sealed with the
        rebalance it gives to), qualified again on every re-read: a donor another receiver took meanwhile is in
        cooldown, or gives no more, and is refused."""
        ref = owner.ref
        assert owner.obj is not None
        record = Rebalance("donor", receiver.ref.kind, receiver.ref.name, receiver.uid, verdict.freed,
                           shortfall.quota, now)

        def decide_again(obj: dict[str, Any]) -> tuple[Workload, Decision, Mode]:
            workload, decision, mode = self._decide(reader, obj, owner, signal, ns, now)
            if isinstance(decision, Action):
                bounds = ns.gpu_bounds(reader, ref.namespace, self.policy.gpu_resource)
                again = qualify(Candidate(workload, signal, _labels(obj), mode, decision), receiver=receiver,
                                shortfall=shortfall, bounds=bounds, policy=self.policy, now=now)
                if not again.qualifies:
                    return workload, Skip(SkipReason.CONFLICT, f"no longer gives: {again.reason}"), mode
            return workload, decision, mode

        attempt = Attempt(ref, signal, decide_again, self._rereader(reader, ref), rebalance=record,
                          event_reason="RebalanceDonated",
                          event_note=(f"; rebalance: gives {verdict.freed} GPUs of quota {shortfall.quota} to "
                                      f"{receiver.ref.kind}/{receiver.ref.name}"))
        with self._other_lock(ref, held=receiver.ref) as locked:
            if not locked:
                return Acted(Skip(SkipReason.CONFLICT, "another decision holds the donor"), Result.SKIPPED)
            return self.actor.carry_out(attempt, owner.obj, now)

    @contextlib.contextmanager
    def _other_lock(self, ref: WorkloadRef, *, held: WorkloadRef | None) -> Iterator[bool]:
        """The workload lock of `ref` while this thread holds `held`'s: only tried, for a bounded time (two
        receivers taking each other's donors must never wait on each other), and not taken again when it is the
        same stripe. Yields whether this thread may go on; the write stays conditional either way."""
        lock = self._workload_locks[hash(ref) % len(self._workload_locks)]
        if held is not None and lock is self._workload_locks[hash(held) % len(self._workload_locks)]:
            yield True
            return
        if not lock.acquire(timeout=2.0 if held is not None else -1):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def _receiving(self, waiting: Waiting) -> dict[str, Any]:
        """The receiver's side of a rebalance, written with its growth."""
        record = Rebalance("receiver", waiting.donor.kind, waiting.donor.name, waiting.donor_uid, waiting.gpus,
                           waiting.quota, self.clock())
        return {"rebalance": record, "event_reason": "RebalanceReceived",
                "event_note": f"; rebalance: {waiting.gpus} GPUs of quota {waiting.quota} given by "
                              f"{waiting.donor.kind}/{waiting.donor.name}"}

    def _grew(self, waiting: Waiting, acted: Acted, now: datetime) -> Acted:
        """A waiting growth decided again: applied ends the rebalance (moved)."""
        if acted.result is Result.APPLIED:
            self.rebalancer.discard(waiting)
            with self._lock:
                self._grow_refusals.pop(waiting.key, None)
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
        reader = self._reader()
        obj = reader.get(owner.ref.kind, owner.ref.namespace, owner.ref.name)
        if obj is None:
            return None
        fresh = replace(owner, obj=obj)
        ns = Namespace()
        attempt = Attempt(owner.ref, signal, lambda o: self._decide(reader, o, fresh, signal, ns, now),
                          self._rereader(reader, owner.ref), **self._receiving(waiting))
        acted = self.actor.carry_out(attempt, obj, now)
        if acted.result is not Result.APPLIED:
            return None
        return self._moved(acted, waiting)

    def _moved(self, acted: Acted, waiting: Waiting) -> Acted:
        """The receiver grew: counted, and its answer and log line say which donor paid for it (not only the
        Events)."""
        self.metrics.rebalances.labels(result="moved").inc()
        self.metrics.rebalance_gpus_moved.inc(waiting.gpus)
        if not isinstance(acted.decision, Action):
            return acted
        return replace(acted, decision=replace(acted.decision, note=(
            f"rebalance: {waiting.donor.kind}/{waiting.donor.name} gave {waiting.gpus} GPUs of quota {waiting.quota}")))

    def _step_owner(self, reader: Reader, ref: WorkloadRef, pod: str, uid: str) -> Owner | None:
        """The workload a waiting step names, read now: through its pod, as a notification resolves it (an
        operator's resource needs its template part), else by name; None when it is gone or is another object."""
        owner = resolve_owner(reader, ref.namespace, pod, self._owners) if pod else None
        if owner is None or owner.ref != ref or owner.obj is None:
            obj = reader.get(ref.kind, ref.namespace, ref.name)
            owner = Owner(ref, obj) if obj is not None else None
        if owner is None or owner.obj is None:
            return None
        if uid and str((owner.obj.get("metadata") or {}).get("uid", "")) != uid:
            return None
        return owner

    def _grow_step(self, waiting: Waiting, now: datetime) -> bool:
        """The rebalancer's pass for a waiting receiver: decide it again (every rail), apply when the quota fits."""
        reader = self._reader()
        owner = self._step_owner(reader, waiting.receiver, waiting.receiver_pod, waiting.receiver_uid)
        if owner is None:
            return self._give_back_step(waiting, now)  # the receiver is gone: nothing waits for the donor's GPUs
        applied: list[WorkloadRef] = []
        with self._workload_locks[hash(owner.ref) % len(self._workload_locks)]:
            decision, result = self._handle_workload(reader, owner, waiting.receiver_signal, Namespace(), now,
                                                     applied, grow=waiting)
        if applied and self.on_applied is not None:
            self.on_applied(applied)
        if isinstance(decision, Skip):  # said with the give-back, if it comes to that
            with self._lock:
                self._grow_refusals[waiting.key] = f"{decision.reason.value}: {decision.detail}"[:300]
        return result is Result.APPLIED

    def _give_back_step(self, waiting: Waiting, now: datetime) -> bool:
        """The receiver could not grow by the deadline: the donor gets back what it gave."""
        with self._lock:
            last = self._grow_refusals.get(waiting.key, f"quota {waiting.quota} showed no room")
        if waiting.kind == GIVE_BACK:
            last = "it holds no record of receiving them; found after a restart of the reactor"
        done = self._return_to_donor(waiting, now, "RebalanceGivenBack", "given-back",
                                     f"{waiting.receiver.kind}/{waiting.receiver.name} could not grow within "
                                     f"{format_duration(self.policy.verify_timeout)} ({last})")
        if done:
            with self._lock:
                self._grow_refusals.pop(waiting.key, None)
        return done

    def _restore_step(self, waiting: Waiting, now: datetime, held: WorkloadRef | None = None) -> bool:
        return self._return_to_donor(waiting, now, "RebalanceRestored", "restored",
                                     f"{waiting.receiver.kind}/{waiting.receiver.name}'s saturation resolved", held)

    def _orphaned_donors(self, now: datetime) -> list[Waiting]:
        """Donors a restart left behind: the rebalancer's list is in memory, the donor's sealed record is not.

        From the watch cache, in memory (no request; without the cache nothing is recovered): a workload whose
        authenticated `rebalance` record says it gave, longer than `verify.timeout` ago, that no waiting step names,
        and whose receiver is gone, is another object now, or holds no authenticated record of receiving from this
        donor — its growth never came. Each is given back as a growth that timed out here would be (the same
        `decide_given_back`, every rail), tried until another `verify.timeout` has passed, then given up (counted
        `not-restored`) and not picked again in this process. A receiver the cache cannot say about waits a pass.
        """
        if self.cache is None:
            return []
        busy = {w.donor for w in self.rebalancer.waiting()}
        found: list[Waiting] = []
        for kind in sorted(PATCHABLE_KINDS):
            for obj in self.cache.select(kind, _names_a_rebalance, containing=REBALANCE.encode()):
                meta = obj.get("metadata") or {}
                ref = WorkloadRef(kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
                if ref in busy or not self.policy.namespace_allowed(ref.namespace):
                    continue
                record = self.view.workload(obj, kind).state.rebalance
                if record is None or record.role != "donor" or now < record.since + self.policy.verify_timeout:
                    continue
                if (ref, record.uid, record.since) in self._orphans_given_up:
                    continue
                receiver = WorkloadRef(record.kind, ref.namespace, record.name)
                if not self._never_received(receiver, record.uid, _uid(obj)):
                    continue
                empty = Signal(alert="", status=Status.RESOLVED, keys=(), container=None, value=None)
                found.append(Waiting(GIVE_BACK, receiver, record.uid, "", empty, ref, "", empty, record.gpus,
                                     record.quota, now + self.policy.verify_timeout, since=record.since,
                                     donor_uid=_uid(obj)))
        return found

    def _never_received(self, receiver: WorkloadRef, receiver_uid: str, donor_uid: str) -> bool:
        """Whether the receiver a donor's record names never took what it gave (False: it did, or the cache
        cannot say yet). Read from the cache, its state authenticated."""
        assert self.cache is not None
        if receiver.kind not in PATCHABLE_KINDS:
            return False  # an operator's resource is not cached: its restore comes with its resolve
        obj = self.cache.lookup(receiver.kind, receiver.namespace, receiver.name)
        if isinstance(obj, Miss):
            return False
        if obj is None or _uid(obj) != receiver_uid:
            return True  # gone, or another object under that name: nothing will ever restore the donor
        record = self.view.workload(obj, receiver.kind).state.rebalance
        return record is None or record.role != "receiver" or record.uid != donor_uid

    def _restore_expired(self, waiting: Waiting, now: datetime) -> None:
        with self._lock:
            self._grow_refusals.pop(waiting.key, None)
            if waiting.kind in (GROW, GIVE_BACK) and waiting.since is not None:  # the give-back was given up
                self._orphans_given_up.add((waiting.donor, waiting.receiver_uid, waiting.since))
        self.metrics.rebalances.labels(result="not-restored").inc()
        log.warning("rebalance: the donor was not given back its GPUs in time", extra={
            "workload": str(waiting.donor), "receiver": str(waiting.receiver), "quota": waiting.quota})

    def _return_to_donor(self, waiting: Waiting, now: datetime, reason: str, result: str, why: str,
                         held: WorkloadRef | None = None) -> bool:
        """The donor's give-back through the act step (`decide_given_back`: its rebalance record for this
        receiver, the rollout, mode, bounds and quota rails). True when done, or when nothing is left to give.
        `held`: the workload whose lock this thread holds (the receiver, in its resolve's notification)."""
        reader = self._reader()
        owner = self._step_owner(reader, waiting.donor, waiting.donor_pod, "")
        if owner is None:
            return True
        ref, ns = owner.ref, Namespace()
        signal = Signal(alert="RebalanceGiveBack", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint=f"rebalance-{waiting.receiver_uid[:16] or 'receiver'}", starts_at=now.isoformat())
        uid = waiting.receiver_uid
        attempt = Attempt(ref, signal, lambda obj: self._decide(reader, obj, owner, signal, ns, now, given_back=uid),
                          self._rereader(reader, ref), rebalance=None, event_reason=reason,
                          event_note=f"; rebalance: {why}")
        with self._other_lock(ref, held=held) as locked:
            if not locked:
                return False  # tried again at the next pass
            acted = self.actor.carry_out(attempt, owner.obj, now)  # type: ignore[arg-type]
        if acted.result is Result.APPLIED:
            self.metrics.rebalances.labels(result=result).inc()
            self.recorder.action(ref, signal, acted.decision, Result.APPLIED)  # type: ignore[arg-type]
            log.info("rebalance: the donor got back what it gave", extra={"workload": str(ref), "reason": why})
            return True
        decision = acted.decision
        over = isinstance(decision, Skip) and decision.reason in (SkipReason.NOTHING_TO_REVERT,
                                                                  SkipReason.CHANGED_SINCE, SkipReason.MODE_OFF)
        if over and isinstance(decision, Skip):
            log.info("rebalance: nothing to give back", extra={"workload": str(ref), "reason": decision.detail})
        return over

    def _restore_after(self, reader: Reader, owner: Owner, now: datetime) -> None:
        """The receiver's saturation resolved: the donor its sealed record names gets back what it gave, once the
        quota shows room for it (tried now, then by the rebalancer until `verify.timeout`)."""
        assert owner.obj is not None
        if self.policy.dry_run:
            return
        receiver = self._workload(owner.obj, owner, reader)
        record = receiver.state.rebalance
        grow = self.rebalancer.waiting_for(owner.ref)
        empty = Signal(alert="", status=Status.RESOLVED, keys=(), container=None, value=None)
        if grow is not None:  # resolved before it grew: it no longer needs what the donor gave
            self.rebalancer.discard(grow)
            donor, pod, gpus, quota = grow.donor, grow.donor_pod, grow.gpus, grow.quota
        elif record is not None and record.role == "receiver":
            donor, pod, gpus, quota = WorkloadRef(record.kind, owner.ref.namespace, record.name), "", record.gpus, \
                record.quota
        else:
            return
        waiting = Waiting(RESTORE, owner.ref, receiver.uid, "", empty, donor, pod, empty, gpus, quota,
                          now + self.policy.verify_timeout)
        if not self._restore_step(waiting, now, held=owner.ref):
            self.rebalancer.add(waiting)


# What a donor another receiver took meanwhile answers when asked again (its write conditional, its change recorded).
_TAKEN = frozenset({SkipReason.CONFLICT, SkipReason.COOLDOWN, SkipReason.ALREADY_APPLIED, SkipReason.HYSTERESIS,
                    SkipReason.ROLLOUT_IN_PROGRESS})


def quota_short(decision: Decision) -> bool:
    """Refused for lack of GPU quota only: the one refusal a rebalance answers."""
    return (isinstance(decision, Skip) and decision.reason is SkipReason.QUOTA_EXCEEDED
            and decision.shortfall is not None and decision.shortfall.gpus > 0)


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _names_a_rebalance(obj: dict[str, Any]) -> bool:
    """A cached object carrying the `rebalance` annotation (unauthenticated: a candidate to read, no more)."""
    return REBALANCE in ((obj.get("metadata") or {}).get("annotations") or {})


def _uid(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid", ""))
