"""Verify after acting: follow each change's rollout, mark it verified, or revert it when it stalls.

A background thread of the worker (started and stopped by the assembly). Each interval, the replica
holding the verifier Lease reads every workload with a pending verification. The work list is not
lossy: the changes this replica made, the Lease's list (every kind the reactor changes, so a restart
drops none), the watch cache scanned in memory for `verification: pending`, and, when more were pending
than the Lease's list holds, a LIST of the workloads (see lease.py). A workload is read from the
watch-fed cache when it holds it (no request), else with one GET; an in-place CPU raise adds one LIST
of the namespace's pods, done only when the kubelets report it applied. What a cached copy would make
final (nothing pending any more, or a revert) is confirmed on a fresh GET first: the cache may lag
behind the reactor's own write. Each pass then reads again each workload whose change still holds GPUs back
(or adds them), the same way, so the GPU ledger (finops.py) follows the workload's truth after verification:
the cost grows with the workloads being verified and those holding GPUs, never with alerts.

Every workload is read through the engine's cluster view (cluster/view.py): an operator's resource
through its adapter and followed by its adapter's rollout reader, a Kueue-managed workload as Kueue
sees it, the state authenticated. The mode holds: `off` writes nothing (no mark, no revert, no Event);
`recommend` reports (a log line and a metric, once per change) and writes nothing.
Done → the sealed `verification` annotation becomes `verified` (built by state/writes.py, the one owner
of state writes); not done `verify.timeout` after the write → the change is reverted to the recorded
original through the act step (the same bounded, conditional, sealed write; the decision is the
policy's `decide_stalled`), recorded as `reverted` with the reason, a `RolloutStalled` Warning and an
`ActionReverted` Event, a metric and a log line. A revert that cannot be applied (refused by the policy,
the budget or the API server) is recorded once — one `RolloutStalled` Warning, which later tries only
count up (act/posting.py's correlator) — and tried again with exponential backoff, not every pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reactor.act.actor import Acted, Actor, Attempt
from reactor.act.ledger import StaleRecord, entry_for
from reactor.act.posting import EventPoster, workload_event
from reactor.act.resize import RESOURCE, compute_facts
from reactor.cluster import compute
from reactor.cluster.cache import MISS, Store
from reactor.cluster.kube import KubeGateway, NotFound
from reactor.cluster.rollout import Progress
from reactor.cluster.view import ClusterView
from reactor.cluster.workloads import namespace_bounds
from reactor.config.settings import Settings
from reactor.core.errors import ConflictError, PermanentError, ReactorError, TemporaryError
from reactor.core.metrics import Metrics
from reactor.core.model import (
    PATCHABLE_KINDS,
    Action,
    Decision,
    Mode,
    Result,
    Signal,
    Skip,
    SkipReason,
    Status,
    Verification,
    Workload,
    WorkloadRef,
)
from reactor.observe.finops import GpuHours
from reactor.observe.lease import VerifierLease
from reactor.observe.periodic import Periodic
from reactor.policy import decide_stalled, effective_mode
from reactor.resolve.owners import Reader
from reactor.state.annotations import PENDING, REVERTED, VERIFICATION, VERIFIED, format_time, read_state
from reactor.state.seal import new_write
from reactor.state.writes import StateWrites

log = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(minutes=10)  # the longest wait between two tries of a refused revert


@dataclass(frozen=True, slots=True)
class _Retry:
    """A revert that could not be applied: how many tries so far, and when the next one may run."""

    tries: int
    at: datetime


class Verifier:
    """Follows the rollouts of the reactor's own changes; `check_all` is one pass, `start` runs passes."""

    def __init__(self, *, settings: Settings, kube: KubeGateway, actor: Actor, view: ClusterView, events: EventPoster,
                 metrics: Metrics, clock: Callable[[], datetime], lease: VerifierLease | None,
                 cache: Store | None = None) -> None:
        self.policy, self.kube, self.actor, self.metrics = settings.policy, kube, actor, metrics
        self.view, self.events = view, events
        self.state = StateWrites(view.state_keys, self.policy.cooldown)
        self.cache = cache  # the watch-fed store, when `kube.watchCache` is on
        self.clock, self.lease = clock, lease
        self._local: set[WorkloadRef] = set()  # without a Lease (one replica): the list lives here
        self._retries: dict[WorkloadRef, _Retry] = {}  # refused reverts, waiting out their backoff
        self._noted: dict[WorkloadRef, tuple[datetime, str]] = {}  # what was reported once (mode off, recommend)
        self._lock = threading.Lock()
        self._loop = Periodic("reactor-verifier", self.policy.verify_interval.total_seconds(), lambda: self.check_all(),
                              "verification pass failed")
        self.ledger = GpuHours(metrics, self.policy.gpu_hourly_cost, self.policy.gpu_resource,
                                allowed=self.policy.namespace_allowed)
        self._backlog: set[WorkloadRef] = set()  # the pending list as the last pass read it (the Lease's too)
        metrics.verifications_pending.read_from(self._pending_now)
        metrics.verifier_leader.read_from(lambda: {(): float(self.leading())})

    # --- what to verify -------------------------------------------------------------------------

    def track(self, refs: Collection[WorkloadRef]) -> None:
        """Called once per notification with every change it applied (never a revert, which is not verified): one
        Lease write for all of them. Never fails the changes: without the Lease, this replica follows them itself
        (and a restart finds them through the watch cache, or once the Lease works)."""
        if not refs:
            return
        with self._lock:
            self._local.update(refs)
        if self.lease is not None:
            try:
                self.lease.add_all(refs, self.clock())
            except ReactorError as e:
                log.warning("verification not shared on the Lease",
                            extra={"workload": ", ".join(sorted(map(str, refs)))[:500], "error": str(e)})

    def _untrack(self, refs: Collection[WorkloadRef], now: datetime) -> None:
        if not refs:
            return
        with self._lock:
            self._local.difference_update(refs)
        for ref in refs:
            self._retries.pop(ref, None)
            self._noted.pop(ref, None)
        if self.lease is not None:
            try:
                self.lease.remove_all(refs, now)
            except ReactorError as e:  # left on the list: the next pass reads them and finds nothing pending
                log.warning("verification not removed from the Lease",
                            extra={"workload": ", ".join(sorted(map(str, refs)))[:500], "error": str(e)})

    def work(self, now: datetime) -> tuple[set[WorkloadRef], set[WorkloadRef] | None] | None:
        """(every workload with a verification to follow, what a LIST found when the Lease's list overflowed, else
        None), or None when another replica leads."""
        with self._lock:
            refs = set(self._local)
        overflowed = False
        if self.lease is not None:
            if not self.lease.lead(now):
                return None
            listed, overflowed = self.lease.read_list()
            refs |= listed
        if self.cache is not None:
            refs |= self._scan_cache()
        found = self._scan_api() if overflowed else None
        return refs | (found or set()), found

    def _scan_cache(self) -> set[WorkloadRef]:
        """The cached workloads whose annotations say a verification is pending (in memory, no request)."""
        assert self.cache is not None
        marked = VERIFICATION.encode()  # only objects carrying the annotation are decoded
        return {_ref(kind, o) for kind in sorted(PATCHABLE_KINDS)
                for o in self.cache.select(kind, _pending, containing=marked)}

    def _scan_api(self) -> set[WorkloadRef]:
        """The workloads whose annotations say a verification is pending, listed from the API server: every kind
        the reactor changes, in the namespaces it may act in (one LIST per kind and namespace, or per kind where
        every namespace is allowed). Only when the Lease's list overflowed."""
        allow = self.policy.allow
        spaces = [""] if "*" in allow else sorted(set(allow) - set(self.policy.deny))
        found: set[WorkloadRef] = set()
        for kind in sorted(PATCHABLE_KINDS):
            for namespace in spaces:
                items, _ = self.kube.list_page(kind, namespace)
                found.update(_ref(kind, o) for o in items if _pending(o))
        for adapter in self.view.adapters:
            try:
                custom = self.kube.list_cluster_custom(adapter.group, adapter.version, adapter.plural)
            except PermanentError as e:  # e.g. the operator's CRD is not installed: none of its kind to follow
                log.info("workloads not listed", extra={"kind": adapter.kind, "error": str(e)})
                continue
            found.update(_ref(adapter.kind, o) for o in custom if _pending(o))
        return {r for r in found if self.policy.namespace_allowed(r.namespace)}

    # --- one pass -------------------------------------------------------------------------------

    def check_all(self) -> int:
        """One pass over the pending verifications if this replica leads; the number of workloads followed."""
        now = self.clock()
        try:
            work = self.work(now)
        except ReactorError as e:  # no Lease to be had: standing by is the safe side
            log.warning("verifier Lease not held", extra={"error": str(e)})
            self.ledger.clear()
            return 0
        if work is None:
            self.ledger.clear()  # the leader counts the GPU-hours: two replicas never count them twice
            return 0
        refs, found = work
        with self._lock:
            self._backlog = set(refs)
        finished: list[WorkloadRef] = []
        for ref in sorted(refs):
            retry = self._retries.get(ref)
            if retry is not None and now < retry.at:
                continue  # a refused revert waits out its backoff: no read, no write
            try:
                if self._check(ref, now):
                    finished.append(ref)
            except ReactorError as e:  # the API failed: the next pass tries again
                log.warning("verification not checked", extra={"workload": str(ref), "error": str(e)})
            except Exception:  # noqa: BLE001 - one workload's surprise never stops the pass for the others
                log.exception("verification failed on one workload", extra={"workload": str(ref)})
        self._untrack(finished, now)  # one Lease write for the whole pass
        if found is not None and self.lease is not None:
            try:  # what is still pending joins the list; the overflow mark goes once the list holds it all
                self.lease.settle(found - set(finished), now)
            except ReactorError as e:  # still marked: the next pass lists the workloads again
                log.warning("verification list not settled", extra={"error": str(e)})
        with self._lock:
            self._backlog -= set(finished)
        self._follow_holds(refs)
        self.ledger.publish(now)
        return len(refs)

    def _follow_holds(self, checked: set[WorkloadRef]) -> None:
        """Read again every workload whose change still holds GPUs back (or adds them) and was not read in this
        pass: the hold lasts only while the change stands (see finops.py). The watch cache's copy when it holds
        the workload, else one GET each."""
        for ref in self.ledger.held():
            if ref in checked:
                continue
            try:
                obj, _ = self._read(ref, fresh=False)
                workload = None if obj is None else self._workload(ref, obj)
            except ReactorError as e:  # the API failed: the hold is kept, and read again next pass
                log.warning("GPU hold not followed", extra={"workload": str(ref), "error": str(e)})
                continue
            self.ledger.follow(ref, workload)

    def _workload(self, ref: WorkloadRef, obj: dict[str, Any]) -> Workload:
        """The workload through the cluster view (adapters, Kueue, the seal), as the engine reads it."""
        child = self.view.child(obj, ref.kind, self._list) if self.view.adapter(ref.kind) else None
        return self.view.workload(obj, ref.kind, part=self.view.part_of(obj, ref.kind), child=child)

    def leading(self) -> bool:
        """Does this replica verify now? Holding the Lease (as last read, no request), or without one."""
        return self.lease is None or self.lease.leading(self.clock())

    def _pending_now(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            return {(): float(len(self._backlog | self._local))}

    def _check(self, ref: WorkloadRef, now: datetime) -> bool:
        """Follow one rollout a step; True when there is nothing left to follow on it."""
        if not self.view.changeable(ref.kind):
            return True  # an operator's kind no longer enabled: the reactor can neither read nor write it
        for fresh in (False, True):
            obj, cached = self._read(ref, fresh=fresh)
            if obj is None:
                self.ledger.follow(ref, None)  # deleted: whatever it held back is held no more
                return True
            child = self.view.child(obj, ref.kind, self._list) if self.view.adapter(ref.kind) else None
            part = self.view.part_of(obj, ref.kind)
            try:
                workload = self.view.workload(obj, ref.kind, part=part, child=child)
            except PermanentError as e:  # the template the change was on is gone: nothing of it left to follow
                log.warning("verification ended", extra={"workload": str(ref), "reason": str(e)})
                return True
            workload = self._judged(workload, now)
            verification = workload.state.verification
            if verification is None or verification.result != PENDING:
                if cached:
                    continue  # the cache may not have seen the write yet: ask the API server
                self.ledger.follow(ref, workload)  # finished (by this replica or another): a hold goes on if it stands
                return True  # nothing pending under a valid seal: nothing to follow
            self.ledger.observe(workload)
            mode = effective_mode(workload, self.policy)
            if mode == Mode.OFF:
                self._note(ref, verification, "not followed while its mode is off: nothing is written")
                return False
            state = self.view.progress(obj, workload, child)
            if state.done:
                state = self._resized_in_place(obj, workload)
            if state.done:  # the verified mark is conditional on this copy's resourceVersion: a stale one is a 409
                if mode == Mode.RECOMMEND:
                    self._note(ref, verification, "rolled out; not marked verified (mode recommend)")
                    return False
                return self._mark_verified(workload, verification, now)
            if state.actuating:
                return False  # a kubelet is applying it (PodResizeInProgress): neither verified nor reverted mid-way
            if now - verification.since < self.policy.verify_timeout:
                return False
            if not cached:
                if mode == Mode.RECOMMEND:
                    self._recommend(ref, verification, state)
                    return False
                return self._revert(obj, workload, verification, state, now)
        return False

    def _resized_in_place(self, obj: dict[str, Any], workload: Workload) -> Progress:
        """An in-place CPU (memory) raise is done when the kubelets say so, not when the owner's patch is: the pods
        that carry it are read (one list of the namespace's pods) and each one's resize state judged. (A memory
        raise that went to the template is judged by the rollout: its pods ask the new limit, and are done.)"""
        last = workload.state.last_action
        resource = RESOURCE.get(last.action) if last is not None else None
        limit = compute.amount(last.to_value, resource) if last is not None and resource is not None else None
        if last is None or resource is None or last.container is None or limit is None \
                or self.policy.cpu_apply_to == "template":
            return Progress(True)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels")
        pods = self.kube.list_objects("Pod", workload.ref.namespace)
        return compute.resize_progress(pods, selector if isinstance(selector, dict) else None,
                                       last.container, limit, resource)

    def _read(self, ref: WorkloadRef, *, fresh: bool) -> tuple[dict[str, Any] | None, bool]:
        """(the object or None, whether it came from the cache): the cache's copy unless `fresh` or not cached."""
        if self.cache is not None and not fresh:
            cached = self.cache.lookup(ref.kind, ref.namespace, ref.name)
            if isinstance(cached, dict):
                return cached, True
        return self._reread(ref), False

    def _list(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """An operator's children, to follow its rollout: from the cache where it holds them, else one LIST."""
        if self.cache is not None:
            cached = self.cache.objects(kind, namespace)
            if cached is not MISS:
                return cached  # type: ignore[return-value]
        return self.kube.list_objects(kind, namespace)

    def _judged(self, workload: Workload, now: datetime) -> Workload:
        """Its record, if it is the reactor's latest (state ledger): a replayed or removed one is nothing to follow."""
        ledger = self.actor.ledger
        return workload if ledger is None or workload.state.unauthenticated else ledger.judge(workload, now)

    def _mark_verified(self, workload: Workload, verification: Verification, now: datetime) -> bool:
        ref = workload.ref
        write = new_write()
        sealed = self.state.verified(workload, verification, now, write=write)
        patch = {"metadata": {"resourceVersion": workload.resource_version, "annotations": sealed}}
        ledger = self.actor.ledger
        if ledger is not None:  # a new record like any other: the ledger names it first
            try:
                ledger.begin(workload, workload.state.not_latest,
                             entry_for(sealed, write, now, self.policy.reverse_after), now)
            except StaleRecord:
                return False  # another replica wrote since: the next pass reads it again
        try:
            self.kube.patch(ref.kind, ref.namespace, ref.name, patch, self.view.adapter(ref.kind))
        except ConflictError:
            if ledger is not None:
                ledger.abort(workload.uid, write, now)
            return False  # changed since the read: the next pass reads it again
        self._done(ref, VERIFIED, verification, "rolled out")
        return True

    def _note(self, ref: WorkloadRef, verification: Verification, what: str) -> bool:
        """Report something about a change once (a log line): True the first time."""
        if self._noted.get(ref) == (verification.since, what):
            return False
        self._noted[ref] = (verification.since, what)
        log.info("rollout " + what, extra={"workload": str(ref), "strategy": verification.strategy,
                                           "written": verification.since.isoformat()})
        return True

    def _recommend(self, ref: WorkloadRef, verification: Verification, state: Progress) -> None:
        """Mode recommend: the revert the verifier would make, reported once (a log line and a metric)."""
        what = f"stalled for {self.policy.verify_timeout}: {state.trouble}; revert recommended (mode recommend)"
        if self._note(ref, verification, what):
            self.metrics.verifications.labels(result="revert-recommended").inc()

    def _revert(self, obj: dict[str, Any], workload: Workload, verification: Verification, state: Progress,
                now: datetime) -> bool:
        ref = workload.ref
        reason = f"rollout stalled for {self.policy.verify_timeout}: {state.trouble}"[:256]
        # An in-place change names the pods it did not reach: the revert resizes those back.
        signal = Signal(alert="RolloutStalled", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint="rollout-stalled", starts_at=format_time(verification.since), pods=state.pods)
        attempt = Attempt(ref, signal, lambda o: self._decide(ref, o, signal, now, workload.part),
                          lambda: self._reread(ref), stalled=(verification, reason), event_reason="ActionReverted")
        try:
            acted = self.actor.carry_out(attempt, obj, now)
        except TemporaryError as e:  # kept changing, or the API server failed: refused for now, like the rest
            acted = Acted(Skip(SkipReason.API_ERROR, str(e)), Result.FAILED, str(e))
        message = f"gpu-reactor: {verification.strategy} {reason}"
        if acted.result is Result.APPLIED:
            self._stalled_event(ref, obj, f"{message}; reverted to the recorded original", now)
            self._done(ref, REVERTED, verification, reason)
            written = self._reread(ref)  # what the revert left on record (an earlier change may still hold GPUs)
            if written is None:
                self.ledger.follow(ref, None)
            else:
                self.ledger.observe(self.view.workload(written, ref.kind, part=workload.part))
            return True
        self._refused(ref, obj, verification, acted, message, now)
        return False

    def _refused(self, ref: WorkloadRef, obj: dict[str, Any], verification: Verification, acted: Acted,
                 message: str, now: datetime) -> None:
        """A revert that could not be applied: one Warning (repeats count on it), the next try after a backoff
        that doubles from `verify.interval` up to MAX_BACKOFF."""
        decision = acted.decision
        why = acted.error or (f"{decision.reason.value}: {decision.detail}" if isinstance(decision, Skip)
                              else acted.result.value)
        retry = self._retries.get(ref)
        tries = 1 if retry is None else retry.tries + 1
        delay = min(self.policy.verify_interval * (2 ** (tries - 1)), MAX_BACKOFF)
        self._retries[ref] = _Retry(tries, now + delay)
        self._stalled_event(ref, obj, f"{message}; the revert could not be applied ({why[:300]}); "
                                      "tried again with backoff", now)
        if tries == 1:
            self.metrics.verifications.labels(result="revert-refused").inc()
        log.log(logging.WARNING if tries == 1 else logging.INFO, "stalled rollout not reverted",
                extra={"workload": str(ref), "result": acted.result.value, "detail": why[:500], "tries": tries,
                       "next": (now + delay).isoformat()})

    def _stalled_event(self, ref: WorkloadRef, obj: dict[str, Any], message: str, now: datetime) -> None:
        self.events.post(workload_event(ref, obj, reason="RolloutStalled", message=message, now=now, warning=True))

    def _decide(self, ref: WorkloadRef, obj: dict[str, Any], signal: Signal, now: datetime,
                part: str) -> tuple[Workload, Decision, Mode]:
        workload = self._judged(self.view.workload(obj, ref.kind, part=part), now)
        reader = Reader(self.kube, adapters=self.view.adapters)
        gpu = self.policy.gpu_resource
        decision: Action | Skip = decide_stalled(
            signal, workload, lambda: self.view.queue_bounds(namespace_bounds(reader, ref.namespace, gpu), workload,
                                                             reader),
            self.policy, now,
            priority_classes=reader.workload_priority_classes if workload.queue else reader.priority_classes,
            cpu=compute_facts(reader, ref.namespace, signal))
        return workload, decision, effective_mode(workload, self.policy)

    def _reread(self, ref: WorkloadRef) -> dict[str, Any] | None:
        try:
            return self.kube.get(ref.kind, ref.namespace, ref.name, self.view.adapter(ref.kind))
        except NotFound:
            return None

    def _done(self, ref: WorkloadRef, result: str, verification: Verification, reason: str) -> None:
        self.metrics.verifications.labels(result=result).inc()
        log.info("rollout " + result, extra={"workload": str(ref), "strategy": verification.strategy,
                                              "reason": reason, "written": verification.since.isoformat()})

    # --- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)

    def run_once(self) -> object:
        """One pass of the thread (reactor/app/background.py)."""
        return self.check_all()


def _pending(obj: dict[str, Any]) -> bool:
    """The object's annotations say a verification is pending (unauthenticated: a candidate to read, no more)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(VERIFICATION)
    if not isinstance(raw, str):
        return False
    verification = read_state({VERIFICATION: raw}).verification
    return verification is not None and verification.result == PENDING


def _ref(kind: str, obj: dict[str, Any]) -> WorkloadRef:
    meta = obj.get("metadata") or {}
    return WorkloadRef(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
