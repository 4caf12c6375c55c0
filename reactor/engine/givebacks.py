"""Rebalancing, the donor's side: what a donor gets back, and when.

A donor is given back what it gave when its receiver could not grow by `verify.timeout` (`give_back`), and
restored once the receiver's saturation resolves and the quota shows the room (`after_resolve`, then `restore`
from the rebalancer's pass). Both go through the act step with `decide_given_back` (every rail). A restart loses
the waiting list, not the donor's sealed record: `recover` finds the donors it left behind in the watch cache.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from reactor.cluster.cache import Miss, Store
from reactor.config.fields import format_duration
from reactor.core.metrics import Metrics
from reactor.core.model import PATCHABLE_KINDS, Rebalance, Result, Signal, Skip, SkipReason, Status, WorkloadRef
from reactor.engine.decider import WorkloadDecider
from reactor.engine.firings import WorkloadLocks
from reactor.engine.metrics import EngineMetrics
from reactor.engine.namespace import Namespace
from reactor.engine.reads import Readers
from reactor.observe.rebalancer import GIVE_BACK, GROW, RESTORE, Waiting, Waitlist
from reactor.policy.values import Policy
from reactor.resolve.owners import Owner, Owners, Reader, resolve_owner
from reactor.state.annotations import REBALANCE

log = logging.getLogger(__name__)

_NO_SIGNAL = Signal(alert="", status=Status.RESOLVED, keys=(), container=None, value=None)


class GiveBacks:
    def __init__(self, *, policy: Policy, metrics: Metrics, decider: WorkloadDecider, readers: Readers,
                 owners: Owners, locks: WorkloadLocks, waitlist: Waitlist, cache: Store | None) -> None:
        self.policy, self.decider, self.readers = policy, decider, readers
        self.counts = EngineMetrics.of(metrics)
        self.owners, self.locks, self.waitlist, self.cache = owners, locks, waitlist, cache
        self._given_up: set[tuple[WorkloadRef, str, datetime]] = set()  # see `recover`
        self._next_scan = datetime.min.replace(tzinfo=UTC)  # without the watch cache: the next LIST (`_marked`)

    def give_back(self, waiting: Waiting, now: datetime) -> bool:
        """The receiver could not grow by the deadline: the donor gets back what it gave."""
        receiver = f"{waiting.receiver.kind}/{waiting.receiver.name}"
        if waiting.kind == GIVE_BACK:
            why = (f"{receiver} holds no record of receiving them (it never grew, or its growth was undone on its "
                   "resolve); found after a restart of the reactor")
        else:
            last = self.waitlist.last_refusal(waiting) or f"quota {waiting.quota} showed no room"
            why = f"{receiver} could not grow within {format_duration(self.policy.verify_timeout)} ({last})"
        done = self._return_to_donor(waiting, now, "RebalanceGivenBack", "given-back", why)
        if done:
            self.waitlist.forget_refusal(waiting)
        return done

    def restore(self, waiting: Waiting, now: datetime, held: WorkloadRef | None = None) -> bool:
        return self._return_to_donor(waiting, now, "RebalanceRestored", "restored",
                                     f"{waiting.receiver.kind}/{waiting.receiver.name}'s saturation resolved", held)

    def after_resolve(self, reader: Reader, owner: Owner, now: datetime) -> None:
        """The receiver's saturation resolved: the donor its sealed record names gets back what it gave, once the
        quota shows room for it (tried now, then by the rebalancer until `verify.timeout`)."""
        assert owner.obj is not None
        receiver = self.decider.workload(owner.obj, owner, reader)
        record = receiver.state.rebalance
        grow = self.waitlist.waiting_for(owner.ref)
        if grow is not None:  # resolved before it grew: it no longer needs what the donor gave
            self.waitlist.discard(grow)
            donor, pod, gpus, quota = grow.donor, grow.donor_pod, grow.gpus, grow.quota
        elif record is not None and record.role == "receiver":
            donor, pod, gpus, quota = WorkloadRef(record.kind, owner.ref.namespace, record.name), "", record.gpus, \
                record.quota
        else:
            return
        waiting = Waiting(RESTORE, owner.ref, receiver.uid, "", _NO_SIGNAL, donor, pod, _NO_SIGNAL, gpus, quota,
                          now + self.policy.verify_timeout)
        if not self.restore(waiting, now, held=owner.ref):
            self.waitlist.add(waiting)

    def recover(self, now: datetime) -> list[Waiting]:
        """Donors a restart left behind: the rebalancer's list is in memory, the donor's sealed record is not.

        From the watch cache, in memory (no request), or without it from a LIST every `verify.timeout`: a workload whose
        authenticated `rebalance` record says it gave, longer than `verify.timeout` ago, that no waiting step names,
        and whose receiver is gone, is another object now, or holds no authenticated record of receiving from this
        donor — its growth never came. Each is given back as a growth that timed out here would be (the same
        `decide_given_back`, every rail), tried until another `verify.timeout` has passed, then given up (counted
        `not-restored`) and not picked again in this process. A receiver the cache cannot say about waits a pass.
        """
        busy = {w.donor for w in self.waitlist.waiting()}
        reader = self.readers.new()
        found: list[Waiting] = []
        for kind, obj in self._marked(reader, now):
            meta = obj.get("metadata") or {}
            ref = WorkloadRef(kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
            if ref in busy or not self.policy.namespace_allowed(ref.namespace):
                continue
            record = self._record(obj, kind, now)
            if record is None or record.role != "donor" or now < record.since + self.policy.verify_timeout:
                continue
            if (ref, record.uid, record.since) in self._given_up:
                continue
            receiver = WorkloadRef(record.kind, ref.namespace, record.name)
            if not self._never_received(reader, receiver, record.uid, uid_of(obj), now):
                continue
            found.append(Waiting(GIVE_BACK, receiver, record.uid, "", _NO_SIGNAL, ref, "", _NO_SIGNAL,
                                 record.gpus, record.quota, now + self.policy.verify_timeout,
                                 since=record.since, donor_uid=uid_of(obj)))
        return found

    def _marked(self, reader: Reader, now: datetime) -> list[tuple[str, dict[str, Any]]]:
        """The workloads carrying a `rebalance` record (unauthenticated: candidates to read, no more). From the watch
        cache, in memory, every pass; without it, listed from the API server — one LIST per kind and allowed
        namespace (per kind where every namespace is allowed), at most once every `verify.timeout`, the longest a
        donor owed waits anyway."""
        if self.cache is not None:
            return [(kind, obj) for kind in sorted(PATCHABLE_KINDS)
                    for obj in self.cache.select(kind, _names_a_rebalance, containing=REBALANCE.encode())]
        if now < self._next_scan:
            return []
        self._next_scan = now + self.policy.verify_timeout
        allow = self.policy.allow
        spaces = [""] if "*" in allow else sorted(set(allow) - set(self.policy.deny))
        return [(kind, obj) for kind in sorted(PATCHABLE_KINDS) for namespace in spaces
                for obj in reader.list_objects(kind, namespace) if _names_a_rebalance(obj)]

    def expired(self, waiting: Waiting, now: datetime) -> None:
        self.waitlist.forget_refusal(waiting)
        if waiting.kind in (GROW, GIVE_BACK) and waiting.since is not None:  # the give-back was given up
            self._given_up.add((waiting.donor, waiting.receiver_uid, waiting.since))
        self.counts.rebalances.labels(result="not-restored").inc()
        log.warning("rebalance: the donor was not given back its GPUs in time", extra={
            "workload": str(waiting.donor), "receiver": str(waiting.receiver), "quota": waiting.quota})

    def _never_received(self, reader: Reader, receiver: WorkloadRef, receiver_uid: str, donor_uid: str,
                        now: datetime) -> bool:
        """Whether the receiver a donor's record names holds nothing of it now: it never grew, or its growth was
        undone on its resolve (False: it holds it, or the cache cannot say yet). Read from the cache (else one
        GET), its state authenticated."""
        if receiver.kind not in PATCHABLE_KINDS:
            return False  # an operator's resource is not cached: its restore comes with its resolve
        if self.cache is not None:
            obj = self.cache.lookup(receiver.kind, receiver.namespace, receiver.name)
            if isinstance(obj, Miss):
                return False
        else:
            obj = reader.get(receiver.kind, receiver.namespace, receiver.name)
        if obj is None or uid_of(obj) != receiver_uid:
            return True  # gone, or another object under that name: nothing will ever restore the donor
        record = self._record(obj, receiver.kind, now)
        return record is None or record.role != "receiver" or record.uid != donor_uid

    def _record(self, obj: dict[str, Any], kind: str, now: datetime) -> Rebalance | None:
        """The `rebalance` record the reactor last wrote for the object: its sealed annotation, judged against the
        state ledger, so an older record put back (a receiver's, replayed to keep the GPUs) or one removed is read as
        the ledger's own copy says (state/ledger_codec.py)."""
        workload = self.decider.view.workload(obj, kind)
        ledger = self.decider.ledger
        return (workload if ledger is None else ledger.judge(workload, now)).state.rebalance

    def _return_to_donor(self, waiting: Waiting, now: datetime, reason: str, result: str, why: str,
                         held: WorkloadRef | None = None) -> bool:
        """The donor's give-back through the act step (`decide_given_back`: its rebalance record for this
        receiver, the rollout, mode, bounds and quota rails). True when done, or when nothing is left to give.
        `held`: the workload whose lock this thread holds (the receiver, in its resolve's notification)."""
        reader = self.readers.new()
        owner = step_owner(reader, self.owners, waiting.donor, waiting.donor_pod, "")
        if owner is None:
            return True
        ref, ns, uid = owner.ref, Namespace(), waiting.receiver_uid
        signal = Signal(alert="RebalanceGiveBack", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint=f"rebalance-{uid[:16] or 'receiver'}", starts_at=now.isoformat())

        def decide(obj: dict[str, Any]) -> Any:
            return self.decider.decide(reader, obj, owner, signal, ns, now, given_back=uid)

        attempt = self.decider.attempt_of(reader, owner, signal, decide, rebalance=None, event_reason=reason,
                                          event_note=f"; rebalance: {why}")
        with self.locks.other(ref, held=held) as locked:
            if not locked:
                return False  # tried again at the next pass
            acted = self.decider.actor.carry_out(attempt, owner.obj, now)  # type: ignore[arg-type]
        if acted.result is Result.APPLIED:
            self.counts.rebalances.labels(result=result).inc()
            self.decider.recorder.action(ref, signal, acted.decision, Result.APPLIED)  # type: ignore[arg-type]
            log.info("rebalance: the donor got back what it gave", extra={"workload": str(ref), "reason": why})
            return True
        decision = acted.decision
        over = isinstance(decision, Skip) and decision.reason in (SkipReason.NOTHING_TO_REVERT,
                                                                  SkipReason.CHANGED_SINCE, SkipReason.MODE_OFF)
        if over and isinstance(decision, Skip):
            log.info("rebalance: nothing to give back", extra={"workload": str(ref), "reason": decision.detail})
        return over


def step_owner(reader: Reader, owners: Owners, ref: WorkloadRef, pod: str, uid: str) -> Owner | None:
    """The workload a waiting step names, read now: through its pod, as a notification resolves it (an operator's
    resource needs its template part), else by name; None when it is gone or is another object."""
    owner = resolve_owner(reader, ref.namespace, pod, owners) if pod else None
    if owner is None or owner.ref != ref or owner.obj is None:
        obj = reader.get(ref.kind, ref.namespace, ref.name)
        owner = Owner(ref, obj) if obj is not None else None
    if owner is None or owner.obj is None:
        return None
    if uid and uid_of(owner.obj) != uid:
        return None
    return owner


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def uid_of(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid", ""))


def _names_a_rebalance(obj: dict[str, Any]) -> bool:
    """A cached object carrying the `rebalance` annotation (unauthenticated: a candidate to read, no more)."""
    return REBALANCE in ((obj.get("metadata") or {}).get("annotations") or {})

