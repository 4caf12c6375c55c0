"""Verify after acting: follow each change's rollout, mark it verified, or revert it when it stalls.

A background thread of the worker (started and stopped by the assembly). Each interval, the replica
holding the verifier Lease reads every workload with a pending verification: from the watch-fed cache
when it holds the workload (no request), else one GET each; an in-place CPU raise adds one LIST of the
namespace's pods, done only when the kubelets report it applied. The cost grows with the workloads being
verified, never with alerts. What a cached copy would make final (nothing pending any more, or a revert)
is confirmed on a fresh GET first: the cache may lag behind the reactor's own write.
Done → the sealed `verification` annotation becomes `verified`; not done `verify.timeout` after the
write → a `RolloutStalled` Warning Event, then the change is reverted to the recorded original through
the act step (the same bounded, conditional, sealed write; the revert decision is the policy's
`revert_stalled`), recorded as
`reverted` with the reason, an `ActionReverted` Event, a metric and a log line.
It must not write anything the act step does not: a verified mark only rewrites the reactor's own
state annotations, conditional on the read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from reactor.act.actor import Actor, Attempt, record_event
from reactor.act.ledger import StaleRecord, entry_for
from reactor.act.resize import RESOURCE, compute_facts
from reactor.cluster import compute
from reactor.cluster.cache import Store
from reactor.cluster.kube import KubeGateway, NotFound
from reactor.cluster.rollout import Progress, progress
from reactor.cluster.workloads import namespace_bounds, to_workload
from reactor.config.settings import Settings
from reactor.core.errors import ConflictError, ReactorError
from reactor.core.metrics import Metrics
from reactor.core.model import Action, Decision, Mode, Result, Signal, Status, Verification, Workload, WorkloadRef
from reactor.observe.finops import GpuLedger
from reactor.observe.lease import VerifierLease
from reactor.policy import effective_mode
from reactor.policy.context import Context
from reactor.policy.revert import revert_stalled
from reactor.resolve.owners import Reader
from reactor.state.annotations import (
    COOLDOWN_UNTIL,
    LAST_ACTION,
    ORIGINAL,
    PENDING,
    REVERTED,
    VERIFICATION,
    VERIFIED,
    format_time,
    verification_annotation,
)
from reactor.state.seal import StateKeys, authenticate, new_write

log = logging.getLogger(__name__)


class Verifier:
    """Follows the rollouts of the reactor's own changes; `check_all` is one pass, `start` runs passes."""

    def __init__(self, *, settings: Settings, kube: KubeGateway, actor: Actor, metrics: Metrics,
                 state_keys: StateKeys, clock: Callable[[], datetime], lease: VerifierLease | None,
                 cache: Store | None = None) -> None:
        self.policy, self.kube, self.actor, self.metrics = settings.policy, kube, actor, metrics
        self.cache = cache  # the watch-fed store, when `kube.watchCache` is on
        self.state_keys, self.clock, self.lease = state_keys, clock, lease
        self._local: set[WorkloadRef] = set()  # without a Lease (one replica): the list lives here
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ledger = GpuLedger(metrics, self.policy.gpu_hourly_cost, self.policy.gpu_resource)

    # --- what to verify -------------------------------------------------------------------------

    def track(self, refs: Collection[WorkloadRef]) -> None:
        """Called once per notification with every change it applied (never a revert, which is not verified): one
        Lease write for all of them. Never fails the changes: without the Lease, this replica follows them itself
        (and a restart finds them only once the Lease works)."""
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
        if self.lease is not None:
            try:
                self.lease.remove_all(refs, now)
            except ReactorError as e:  # left on the list: the next pass reads them and finds nothing pending
                log.warning("verification not removed from the Lease",
                            extra={"workload": ", ".join(sorted(map(str, refs)))[:500], "error": str(e)})

    # --- one pass -------------------------------------------------------------------------------

    def check_all(self) -> int:
        """One pass over the pending verifications if this replica leads; the number of workloads read."""
        now = self.clock()
        with self._lock:
            refs = set(self._local)
        if self.lease is not None:
            try:
                if not self.lease.lead(now):
                    return 0
                refs |= self.lease.pending()
            except ReactorError as e:  # no Lease to be had: standing by is the safe side
                log.warning("verifier Lease not held", extra={"error": str(e)})
                return 0
        finished: list[WorkloadRef] = []
        for ref in sorted(refs):
            try:
                if self._check(ref, now):
                    finished.append(ref)
            except ReactorError as e:  # the API failed: the next pass tries again
                log.warning("verification not checked", extra={"workload": str(ref), "error": str(e)})
            except Exception:  # noqa: BLE001 - one workload's surprise never stops the pass for the others
                log.exception("verification failed on one workload", extra={"workload": str(ref)})
        self._untrack(finished, now)  # one Lease write for the whole pass
        self.ledger.publish(now)
        return len(refs)

    def _check(self, ref: WorkloadRef, now: datetime) -> bool:
        """Follow one rollout a step; True when there is nothing left to follow on it."""
        for fresh in (False, True):
            obj, cached = self._read(ref, fresh=fresh)
            if obj is None:
                return True
            workload = self._authentic(to_workload(obj, ref.kind, self.policy.gpu_resource), now)
            verification = workload.state.verification
            if verification is None or verification.result != PENDING:
                if cached:
                    continue  # the cache may not have seen the write yet: ask the API server
                self.ledger.observe(workload)
                return True  # nothing pending under a valid seal: nothing to follow
            self.ledger.observe(workload)
            state = progress(obj, ref.kind)
            if state.done:
                state = self._resized_in_place(obj, workload)
            if state.done:  # the verified mark is conditional on this copy's resourceVersion: a stale one is a 409
                return self._mark_verified(workload, verification, now)
            if state.actuating:
                return False  # a kubelet is applying it (PodResizeInProgress): neither verified nor reverted mid-way
            if now - verification.since < self.policy.verify_timeout:
                return False
            if not cached:
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

    def _authentic(self, workload: Workload, now: datetime) -> Workload:
        """Its record, if it is authentic and the reactor's latest (a replayed or removed one: nothing to follow)."""
        workload = authenticate(workload, self.state_keys)
        ledger = self.actor.ledger
        return workload if ledger is None or workload.state.unauthenticated else ledger.judge(workload, now)

    def _mark_verified(self, workload: Workload, verification: Verification, now: datetime) -> bool:
        kept = {k: workload.annotations.get(k) for k in (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL)}
        kept[VERIFICATION] = verification_annotation(VERIFIED, verification.strategy, now)
        write = new_write()
        sealed = self.state_keys.sealed(workload.uid, kept, write)
        patch = {"metadata": {"resourceVersion": workload.resource_version, "annotations": sealed}}
        ledger = self.actor.ledger
        if ledger is not None:  # a new record like any other: the ledger names it first
            try:
                ledger.begin(workload, workload.state.not_latest,
                             entry_for(sealed, write, now, self.policy.reverse_after), now)
            except StaleRecord:
                return False  # another replica wrote since: the next pass reads it again
        try:
            self.kube.patch(workload.ref.kind, workload.ref.namespace, workload.ref.name, patch,
                            self.actor.adapters.get(workload.ref.kind))
        except ConflictError:
            if ledger is not None:
                ledger.abort(workload.uid, write, now)
            return False  # changed since the read: the next pass reads it again
        self._done(workload.ref, VERIFIED, verification, "rolled out")
        return True

    def _revert(self, obj: dict[str, Any], workload: Workload, verification: Verification, state: Progress,
                now: datetime) -> bool:
        ref = workload.ref
        reason = f"rollout stalled for {self.policy.verify_timeout}: {state.trouble}"[:256]
        stalled = Action(action=verification.strategy.rsplit("-", 1)[0], direction="up", workload=ref,
                         container=None, from_value=None, to_value=None, strategy=verification.strategy)
        record_event(self.kube, stalled, obj, f"gpu-reactor: {verification.strategy} {reason}", now,
                     reason="RolloutStalled", warning=True)
        # An in-place change names the pods it did not reach: the revert resizes those back.
        signal = Signal(alert="RolloutStalled", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint="rollout-stalled", starts_at=format_time(verification.since), pods=state.pods)
        marked = {VERIFICATION: verification_annotation(REVERTED, verification.strategy, now, reason)}
        attempt = Attempt(ref, signal, lambda o: self._decide(ref, o, signal, now),
                          lambda: self._reread(ref), annotations=marked, event_reason="ActionReverted")
        acted = self.actor.carry_out(attempt, obj, now)
        if acted.result is Result.APPLIED:
            self._done(ref, REVERTED, verification, reason)
            written = self._reread(ref)
            if written is not None:  # what the revert left on record, for the GPU-hours
                self.ledger.observe(to_workload(written, ref.kind, self.policy.gpu_resource))
            return True
        log.warning("stalled rollout not reverted", extra={"workload": str(ref), "reason": reason,
                    "result": acted.result.value, "detail": getattr(acted.decision, "detail", acted.error)})
        return False

    def _decide(self, ref: WorkloadRef, obj: dict[str, Any], signal: Signal,
                now: datetime) -> tuple[Workload, Decision, Mode]:
        workload = self._authentic(to_workload(obj, ref.kind, self.policy.gpu_resource), now)
        reader = Reader(self.kube, adapters=self.actor.adapters)
        ctx = Context(signal, workload, lambda: namespace_bounds(reader, ref.namespace, self.policy.gpu_resource),
                      self.policy, now, priority_classes=reader.priority_classes,
                      cpu=compute_facts(reader, ref.namespace, signal))
        return workload, revert_stalled(ctx), effective_mode(workload, self.policy)

    def _reread(self, ref: WorkloadRef) -> dict[str, Any] | None:
        try:
            return self.kube.get(ref.kind, ref.namespace, ref.name, self.actor.adapters.get(ref.kind))
        except NotFound:
            return None

    def _done(self, ref: WorkloadRef, result: str, verification: Verification, reason: str) -> None:
        self.metrics.verifications.labels(result=result).inc()
        log.info("rollout " + result, extra={"workload": str(ref), "strategy": verification.strategy,
                                              "reason": reason, "written": verification.since.isoformat()})

    # --- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reactor-verifier", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        interval = self.policy.verify_interval.total_seconds()
        while not self._stop.wait(interval):
            try:
                self.check_all()
            except Exception:  # noqa: BLE001 - the thread must outlive one bad pass; the next one retries
                log.exception("verification pass failed")
