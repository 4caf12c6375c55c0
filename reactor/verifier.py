"""Verify after acting: follow each change's rollout, mark it verified, or revert it when it stalls.

A background thread of the worker (started and stopped by the assembly). Each interval, the replica
holding the verifier Lease reads every workload with a pending verification (one GET each, and one LIST of
the namespace's pods for an in-place CPU raise, which is done only when the kubelets report it applied: the
cost grows with the workloads being verified, never with alerts). Done → the sealed `verification`
annotation becomes `verified`; not done `verify.timeout` after the write → a `RolloutStalled` Warning
Event, then the change is reverted to the recorded original through the act step (the same bounded,
conditional, sealed write; the revert decision is the policy's `revert_stalled`), recorded as
`reverted` with the reason, an `ActionReverted` Event, a metric and a log line.
It must not write anything the act step does not: a verified mark only rewrites the reactor's own
state annotations, conditional on the read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import cpu_objects
from .act import Actor, Attempt, record_event
from .annotations import (
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
from .cpu_act import RESOURCE, cpu_facts
from .errors import ConflictError, ReactorError
from .finops import GpuLedger
from .kube import KubeGateway, NotFound
from .lease import VerifierLease
from .metrics import Metrics
from .model import Action, Decision, Mode, Result, Signal, Status, Verification, Workload, WorkloadRef
from .policy import effective_mode
from .policy.context import Context
from .policy.revert import revert_stalled
from .resolve import Reader
from .rollout import Progress, progress
from .settings import Settings
from .statemac import StateKeys, authenticate
from .workloads import namespace_bounds, to_workload

log = logging.getLogger(__name__)


class Verifier:
    """Follows the rollouts of the reactor's own changes; `check_all` is one pass, `start` runs passes."""

    def __init__(self, *, settings: Settings, kube: KubeGateway, actor: Actor, metrics: Metrics,
                 state_keys: StateKeys, clock: Callable[[], datetime], lease: VerifierLease | None) -> None:
        self.policy, self.kube, self.actor, self.metrics = settings.policy, kube, actor, metrics
        self.state_keys, self.clock, self.lease = state_keys, clock, lease
        self._local: set[WorkloadRef] = set()  # without a Lease (one replica): the list lives here
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ledger = GpuLedger(metrics)

    # --- what to verify -------------------------------------------------------------------------

    def track(self, ref: WorkloadRef) -> None:
        """Called after each applied change (never for a revert, which is not verified); never fails the change:
        without the Lease, this replica follows it itself (and a restart finds it only once the Lease works)."""
        with self._lock:
            self._local.add(ref)
        if self.lease is not None:
            try:
                self.lease.add(ref, self.clock())
            except ReactorError as e:
                log.warning("verification not shared on the Lease", extra={"workload": str(ref), "error": str(e)})

    def _untrack(self, ref: WorkloadRef, now: datetime) -> None:
        with self._lock:
            self._local.discard(ref)
        if self.lease is not None:
            try:
                self.lease.remove(ref, now)
            except ReactorError as e:  # left on the list: the next pass reads it and finds nothing pending
                log.warning("verification not removed from the Lease", extra={"workload": str(ref), "error": str(e)})

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
        for ref in sorted(refs):
            try:
                self._check(ref, now)
            except ReactorError as e:  # the API failed: the next pass tries again
                log.warning("verification not checked", extra={"workload": str(ref), "error": str(e)})
        self.ledger.publish(now)
        return len(refs)

    def _check(self, ref: WorkloadRef, now: datetime) -> None:
        try:
            obj = self.kube.get(ref.kind, ref.namespace, ref.name, self.actor.adapters.get(ref.kind))
        except NotFound:
            self._untrack(ref, now)
            return
        workload = authenticate(to_workload(obj, ref.kind, self.policy.gpu_resource), self.state_keys)
        self.ledger.observe(workload)
        verification = workload.state.verification
        if verification is None or verification.result != PENDING:
            self._untrack(ref, now)  # nothing pending under a valid seal: nothing to follow
            return
        state = progress(obj, ref.kind)
        if state.done:
            state = self._resized_in_place(obj, workload)
        if state.done:
            self._mark_verified(workload, verification, now)
        elif state.actuating:
            return  # a kubelet is applying it (PodResizeInProgress): neither verified nor reverted mid-way
        elif now - verification.since >= self.policy.verify_timeout:
            self._revert(obj, workload, verification, state, now)

    def _resized_in_place(self, obj: dict[str, Any], workload: Workload) -> Progress:
        """An in-place CPU (memory) raise is done when the kubelets say so, not when the owner's patch is: the pods
        that carry it are read (one list of the namespace's pods) and each one's resize state judged. (A memory
        raise that went to the template is judged by the rollout: its pods ask the new limit, and are done.)"""
        last = workload.state.last_action
        resource = RESOURCE.get(last.action) if last is not None else None
        limit = cpu_objects.amount(last.to_value, resource) if last is not None and resource is not None else None
        if last is None or resource is None or last.container is None or limit is None \
                or self.policy.cpu_apply_to == "template":
            return Progress(True)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels")
        pods = self.kube.list_objects("Pod", workload.ref.namespace)
        return cpu_objects.resize_progress(pods, selector if isinstance(selector, dict) else None,
                                           last.container, limit, resource)

    def _mark_verified(self, workload: Workload, verification: Verification, now: datetime) -> None:
        kept = {k: workload.annotations.get(k) for k in (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL)}
        kept[VERIFICATION] = verification_annotation(VERIFIED, verification.strategy, now)
        patch = {"metadata": {"resourceVersion": workload.resource_version,
                              "annotations": self.state_keys.sealed(workload.uid, kept)}}
        try:
            self.kube.patch(workload.ref.kind, workload.ref.namespace, workload.ref.name, patch,
                            self.actor.adapters.get(workload.ref.kind))
        except ConflictError:
            return  # changed since the read: the next pass reads it again
        self._done(workload.ref, VERIFIED, verification, "rolled out", now)

    def _revert(self, obj: dict[str, Any], workload: Workload, verification: Verification, state: Progress,
                now: datetime) -> None:
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
            self._done(ref, REVERTED, verification, reason, now)
            written = self._reread(ref)
            if written is not None:  # what the revert left on record, for the GPU-hours
                self.ledger.observe(to_workload(written, ref.kind, self.policy.gpu_resource))
        else:
            log.warning("stalled rollout not reverted", extra={"workload": str(ref), "reason": reason,
                        "result": acted.result.value, "detail": getattr(acted.decision, "detail", acted.error)})

    def _decide(self, ref: WorkloadRef, obj: dict[str, Any], signal: Signal,
                now: datetime) -> tuple[Workload, Decision, Mode]:
        workload = authenticate(to_workload(obj, ref.kind, self.policy.gpu_resource), self.state_keys)
        reader = Reader(self.kube, adapters=self.actor.adapters)
        ctx = Context(signal, workload, lambda: namespace_bounds(reader, ref.namespace, self.policy.gpu_resource),
                      self.policy, now, priority_classes=reader.priority_classes,
                      cpu=cpu_facts(reader, ref.namespace, signal))
        return workload, revert_stalled(ctx), effective_mode(workload, self.policy)

    def _reread(self, ref: WorkloadRef) -> dict[str, Any] | None:
        try:
            return self.kube.get(ref.kind, ref.namespace, ref.name, self.actor.adapters.get(ref.kind))
        except NotFound:
            return None

    def _done(self, ref: WorkloadRef, result: str, verification: Verification, reason: str, now: datetime) -> None:
        self.metrics.verifications.labels(result=result).inc()
        log.info("rollout " + result, extra={"workload": str(ref), "strategy": verification.strategy,
                                              "reason": reason, "written": verification.since.isoformat()})
        self._untrack(ref, now)

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
