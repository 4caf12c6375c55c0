"""The verifier's Lease: which replica verifies rollouts, and which workloads await verification.

One Lease per reactor deployment (coordination.k8s.io/v1). Leadership follows the client-go rules
with optimistic concurrency: the holder renews before `leaseDurationSeconds` runs out; another
replica takes over only an expired Lease; every update carries the resourceVersion it read, so of
two replicas racing for it one gets a 409 and stands by. The Lease also carries the list of workloads
with a pending verification (any replica that acts adds one), so the leader, a restarted reactor or
the other replica finds them without listing workloads. A ref in it only causes a read: nothing is acted
on unless the workload's own sealed state says a verification is pending. Every kind the reactor can
change is kept (the built-in ones and the enabled operators' kinds), so a restart drops none.

The list is bounded (an object's annotations hold 256 KiB at most), but never silently: past MAX_PENDING
refs the Lease is marked `verifying-overflow`, and the leader then finds the pending verifications by
listing the workloads (see the verifier's scan) until the list holds them all again (`settle`).

The list is written once per notification (every change it applied, in one update) and once per verifier
pass (every verification it finished). Each update starts from the Lease this replica last read or wrote,
so while no other replica writes it costs one PUT and no GET; a 409 (another replica wrote since) means:
read it again, apply the same change, try again. The resourceVersion precondition is never skipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor.cluster.kube import KubeGateway, NotFound
from reactor.core.errors import ConflictError
from reactor.core.model import PATCHABLE_KINDS, WorkloadRef
from reactor.resolve.owners import valid_name, valid_namespace

log = logging.getLogger(__name__)

VERIFYING_KEY = "gpu-reactor.io/verifying"  # the Lease annotation listing the workloads being verified
OVERFLOW_KEY = "gpu-reactor.io/verifying-overflow"  # "true": more were pending than the list holds
MAX_PENDING = 1000
_TRIES = 5
_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"  # RFC3339Micro (apimachinery meta/v1 micro_time.go): always six digits, in UTC


class VerifierLease:
    """Leader election and the pending list on one named Lease."""

    def __init__(self, kube: KubeGateway, *, namespace: str, name: str, identity: str, duration: timedelta,
                 kinds: frozenset[str] = PATCHABLE_KINDS) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.kinds = kinds  # the kinds the reactor can change: a ref of another kind on the list is dropped
        self.duration = max(1, int(duration.total_seconds()))
        self._last: dict[str, Any] | None = None  # the Lease as this replica last read or wrote it
        self._writing = threading.Lock()  # this process's writers take turns rather than 409 each other

    def lead(self, now: datetime) -> bool:
        """Hold the Lease for another term: True if this replica holds it now (always read fresh: once a pass)."""
        with self._writing:
            lease = self._read()
            if lease is None:
                return self._create(now, [])
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") not in (None, "", self.identity) and not _expired(spec, now):
                return False
            transitions = int(spec.get("leaseTransitions") or 0) + (spec.get("holderIdentity") != self.identity)
            lease["spec"] = {**spec, **self._term(now, spec), "leaseTransitions": transitions}
            return self._update(lease)

    def leading(self, now: datetime) -> bool:
        """Does this replica hold the Lease, as it last read or wrote it? No request (reactor_verifier_leader)."""
        spec = (self._last or {}).get("spec") or {}
        return spec.get("holderIdentity") == self.identity and not _expired(spec, now)

    def pending(self) -> set[WorkloadRef]:
        """The list as the Lease holds it now (read fresh: once a pass)."""
        return self.read_list()[0]

    def read_list(self) -> tuple[set[WorkloadRef], bool]:
        """(the list, whether it overflowed: more are pending than it names), read fresh: once a pass."""
        with self._writing:
            lease = self._read()
        if lease is None:
            return set(), False
        return pending_refs(lease, self.kinds), overflowed(lease)

    def settle(self, found: Iterable[WorkloadRef], now: datetime) -> None:
        """After a scan found every pending verification: they join the list, and the overflow mark goes if the
        list then holds them all."""
        refs = frozenset(found)
        self._change(lambda on: on | refs, now, settle=True)

    def add(self, ref: WorkloadRef, now: datetime) -> None:
        self.add_all((ref,), now)

    def remove(self, ref: WorkloadRef, now: datetime) -> None:
        self.remove_all((ref,), now)

    def add_all(self, refs: Iterable[WorkloadRef], now: datetime) -> None:
        """Put every ref on the list in one write (nothing is written when they are all on it already)."""
        added = frozenset(refs)
        if added:
            self._change(lambda on: on | added, now)

    def remove_all(self, refs: Iterable[WorkloadRef], now: datetime) -> None:
        removed = frozenset(refs)
        if removed:
            self._change(lambda on: on - removed, now)

    def _change(self, change: Callable[[set[WorkloadRef]], set[WorkloadRef]], now: datetime, *,
                settle: bool = False) -> None:
        """Read-modify-write of the list, conditional on the resourceVersion of the copy it started from; a 409
        means another replica wrote first: read again and apply the same change."""
        with self._writing:
            for _ in range(_TRIES):
                fresh = self._last is None
                lease = self._read() if fresh else self._last
                if lease is None:
                    if self._create(now, sorted(change(set()))):
                        return
                    continue
                before, was_over = pending_refs(lease, self.kinds), overflowed(lease)
                refs = change(before)
                # Past the bound the mark stays until a scan settles the list: refs left off are not forgotten.
                over = len(refs) > MAX_PENDING or (was_over and not settle)
                if refs == before and over == was_over:
                    if fresh:
                        return  # the Lease says so now: nothing to write
                    self._last = None  # an old copy may say so wrongly (another replica removed them): read it
                    continue
                if over and not was_over:
                    log.warning("verification list full: the leader lists workloads to find them all",
                                extra={"lease": self.name, "pending": len(refs), "max": MAX_PENDING})
                meta = lease.get("metadata") or {}
                annotations = {**(meta.get("annotations") or {}), VERIFYING_KEY: _encode(refs),
                               OVERFLOW_KEY: "true" if over else None}
                annotations = {k: v for k, v in annotations.items() if v is not None}
                if self._update({**lease, "metadata": {**meta, "annotations": annotations}}):
                    return
        log.warning("verification list not updated", extra={"lease": self.name, "tries": _TRIES})

    def _term(self, now: datetime, spec: dict[str, Any]) -> dict[str, Any]:
        mine = spec.get("holderIdentity") == self.identity and not _expired(spec, now)
        acquired = spec.get("acquireTime") if mine else micro_time(now)
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "acquireTime": acquired, "renewTime": micro_time(now)}

    def _read(self) -> dict[str, Any] | None:
        try:
            self._last = self.kube.get_lease(self.namespace, self.name)
        except NotFound:
            self._last = None
        return self._last

    def _create(self, now: datetime, refs: list[WorkloadRef]) -> bool:
        annotations = {VERIFYING_KEY: _encode(refs)}
        if len(refs) > MAX_PENDING:
            annotations[OVERFLOW_KEY] = "true"
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, "annotations": annotations},
                "spec": {**self._term(now, {}), "leaseTransitions": 0}}
        try:
            self._last = self.kube.create_lease(self.namespace, body)
        except ConflictError:  # 409 AlreadyExists: another replica created it first
            self._last = None
            return False
        return True

    def _update(self, lease: dict[str, Any]) -> bool:
        try:
            self._last = self.kube.update_lease(self.namespace, self.name, lease)
        except ConflictError:  # another replica wrote since this copy was read: the next try reads it again
            self._last = None
            return False
        except Exception:
            self._last = None  # not known what the server holds now
            raise
        return True


def micro_time(moment: datetime) -> str:
    """A MicroTime as kube-apiserver decodes one: RFC3339Micro, six fraction digits even at a whole second
    (`…T12:00:00.000000Z`; `isoformat()` would drop them, a 400), in UTC (a zone-aware `moment` elsewhere is
    converted, never printed with a wrong `Z`). A naive `moment` is taken as UTC, as the reactor's clocks give."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime(_MICRO)


def overflowed(lease: dict[str, Any]) -> bool:
    return ((lease.get("metadata") or {}).get("annotations") or {}).get(OVERFLOW_KEY) == "true"


def pending_refs(lease: dict[str, Any], kinds: frozenset[str] = PATCHABLE_KINDS) -> set[WorkloadRef]:
    """The refs in the Lease's list that name a workload of `kinds` (those the reactor can change); the rest is
    dropped."""
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(VERIFYING_KEY, "[]")
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        return set()
    refs = set()
    for item in doc if isinstance(doc, list) else []:
        parts = item.split("/") if isinstance(item, str) else []
        if len(parts) == 3 and parts[0] in kinds and valid_namespace(parts[1]) and valid_name(parts[2]):
            refs.add(WorkloadRef(*parts))
    return refs


def _encode(refs: set[WorkloadRef] | list[WorkloadRef]) -> str:
    kept = sorted(refs)[:MAX_PENDING]
    return json.dumps([str(r) for r in kept], separators=(",", ":"))


def _expired(spec: dict[str, Any], now: datetime) -> bool:
    try:
        renewed = datetime.fromisoformat(str(spec.get("renewTime")))
        duration = int(spec.get("leaseDurationSeconds") or 0)
    except ValueError:
        return True  # a Lease nobody can read the time of is nobody's
    if renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=UTC)
    return now >= renewed + timedelta(seconds=duration)
