"""Verify after acting: follow each change's rollout, mark it verified, or revert it when it stalls.

A background thread of the worker (started and stopped by the runner). Each interval, the replica
holding the verifier Lease reads every workload with a pending verification (worklist.py: the list
that loses none). A workload is read from the
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
original (stalled.py), recorded as `reverted`, a metric and a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from reactor.act.actor import Actor
from reactor.act.ledger import StaleRecord, entry_for
from reactor.act.resize import RESOURCE
from reactor.cluster import compute
from reactor.cluster.cache import MISS, Store
from reactor.cluster.kube import KubeGateway
from reactor.cluster.rollout import Progress
from reactor.cluster.view import ClusterView
from reactor.config.settings import Settings
from reactor.core.errors import ConflictError, PermanentError, ReactorError
from reactor.core.metrics import Metrics
from reactor.core.model import (
    Mode,
    Verification,
    Workload,
    WorkloadRef,
)
from reactor.observe.finops import GpuHours
from reactor.observe.lease import VerifierLease
from reactor.observe.metrics import ObserveMetrics
from reactor.observe.periodic import Periodic, PeriodicPart
from reactor.observe.stalled import StalledReverts, judged, reread
from reactor.observe.worklist import Worklist
from reactor.policy import effective_mode
from reactor.state.annotations import PENDING, REVERTED, VERIFIED
from reactor.state.seal import new_write
from reactor.state.writes import StateWrites

log = logging.getLogger(__name__)

class Verifier(PeriodicPart):
    """Follows the rollouts of the reactor's own changes; `check_all` is one pass, `start` runs passes."""

    def __init__(self, *, settings: Settings, kube: KubeGateway, actor: Actor, view: ClusterView,
                 metrics: Metrics, clock: Callable[[], datetime], worklist: Worklist, reverts: StalledReverts,
                 hours: GpuHours, state: StateWrites, cache: Store | None = None) -> None:
        self.policy, self.kube, self.actor = settings.policy, kube, actor
        self.counts = counts = ObserveMetrics.of(metrics)  # observe/metrics.py
        self.view, self.worklist, self.reverts, self.state = view, worklist, reverts, state
        self.cache = cache  # the watch-fed store, when `kube.watchCache` is on
        self.clock = clock
        self._noted: dict[WorkloadRef, tuple[datetime, str]] = {}  # what was reported once (mode off, recommend)
        self._loop = Periodic("reactor-verifier", self.policy.verify_interval.total_seconds(), lambda: self.check_all(),
                              "verification pass failed")
        self.ledger = hours  # the GPU-hours the reactor's standing changes hold back (finops.py)
        counts.verifications_pending.read_from(worklist.pending_now)
        counts.verifier_leader.read_from(lambda: {(): float(self.leading())})

    @property
    def lease(self) -> VerifierLease | None:
        return self.worklist.lease

    @lease.setter
    def lease(self, lease: VerifierLease | None) -> None:
        self.worklist.lease = lease

    def track(self, refs: Collection[WorkloadRef]) -> None:
        """Called once per notification with every change it applied: see `Worklist.track`."""
        self.worklist.track(refs)

    def leading(self) -> bool:
        return self.worklist.leading()

    # --- one pass -------------------------------------------------------------------------------

    def check_all(self) -> int:
        """One pass over the pending verifications if this replica leads; the number of workloads followed."""
        now = self.clock()
        try:
            work = self.worklist.work(now)
        except ReactorError as e:  # no Lease to be had: standing by is the safe side
            log.warning("verifier Lease not held", extra={"error": str(e)})
            self.ledger.clear()
            return 0
        if work is None:
            self.ledger.clear()  # the leader counts the GPU-hours: two replicas never count them twice
            return 0
        refs, found = work
        finished: list[WorkloadRef] = []
        for ref in sorted(refs):
            if self.reverts.waiting(ref, now):
                continue  # a refused revert waits out its backoff: no read, no write
            try:
                if self._check(ref, now):
                    finished.append(ref)
            except ReactorError as e:  # the API failed: the next pass tries again
                log.warning("verification not checked", extra={"workload": str(ref), "error": str(e)})
            except Exception:  # noqa: BLE001 - one workload's surprise never stops the pass for the others
                log.exception("verification failed on one workload", extra={"workload": str(ref)})
        for ref in finished:
            self.reverts.forget(ref)
            self._noted.pop(ref, None)
        self.worklist.untrack(finished, now)  # one Lease write for the whole pass
        self.worklist.settle(found, finished, now)
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
            workload = judged(self.actor, workload, now)
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
        return reread(self.kube, self.view, ref), False

    def _list(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """An operator's children, to follow its rollout: from the cache where it holds them, else one LIST."""
        if self.cache is not None:
            cached = self.cache.objects(kind, namespace)
            if cached is not MISS:
                return cached  # type: ignore[return-value]
        return self.kube.list_objects(kind, namespace)

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
            self.counts.verifications.labels(result="revert-recommended").inc()

    def _revert(self, obj: dict[str, Any], workload: Workload, verification: Verification, state: Progress,
                now: datetime) -> bool:
        ref = workload.ref
        applied, reason = self.reverts.revert(obj, workload, verification, state, now)
        if not applied:
            return False
        self._done(ref, REVERTED, verification, reason)
        # What the revert left on record (an earlier change may still hold GPUs).
        written = reread(self.kube, self.view, ref)
        if written is None:
            self.ledger.follow(ref, None)
        else:
            self.ledger.observe(self.view.workload(written, ref.kind, part=workload.part))
        return True

    def _done(self, ref: WorkloadRef, result: str, verification: Verification, reason: str) -> None:
        self.counts.verifications.labels(result=result).inc()
        log.info("rollout " + result, extra={"workload": str(ref), "strategy": verification.strategy,
                                              "reason": reason, "written": verification.since.isoformat()})
