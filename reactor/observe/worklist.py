"""What the verifier follows: the workloads with a pending verification, found without losing one.

The list is not lossy: the changes this replica made, the Lease's list (every kind the reactor changes, so a restart
drops none), the watch cache scanned in memory for `verification: pending`, and, when more were pending than the
Lease's list holds, a LIST of the workloads (see lease.py). Only the replica holding the verifier Lease gets work.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from reactor.cluster.cache import Store
from reactor.cluster.kube import KubeGateway
from reactor.core.errors import PermanentError, ReactorError
from reactor.core.model import PATCHABLE_KINDS, WorkloadRef
from reactor.integrations.adapters import Adapters
from reactor.observe.lease import VerifierLease
from reactor.policy.values import Policy
from reactor.state.annotations import PENDING, VERIFICATION, read_state

log = logging.getLogger(__name__)

Work = tuple[set[WorkloadRef], set[WorkloadRef] | None]  # every workload to follow, and what a LIST found


class Worklist:
    def __init__(self, *, policy: Policy, kube: KubeGateway, adapters: Adapters, lease: VerifierLease | None,
                 cache: Store | None, clock: Callable[[], datetime]) -> None:
        self.policy, self.kube, self.adapters, self.lease, self.cache = policy, kube, adapters, lease, cache
        self.clock = clock
        self._local: set[WorkloadRef] = set()  # without a Lease (one replica): the list lives here
        self._backlog: set[WorkloadRef] = set()  # the pending list as the last pass read it (the Lease's too)
        self._lock = threading.Lock()

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

    def untrack(self, refs: Collection[WorkloadRef], now: datetime) -> None:
        if not refs:
            return
        with self._lock:
            self._local.difference_update(refs)
            self._backlog -= set(refs)
        if self.lease is not None:
            try:
                self.lease.remove_all(refs, now)
            except ReactorError as e:  # left on the list: the next pass reads them and finds nothing pending
                log.warning("verification not removed from the Lease",
                            extra={"workload": ", ".join(sorted(map(str, refs)))[:500], "error": str(e)})

    def work(self, now: datetime) -> Work | None:
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
        refs |= found or set()
        with self._lock:
            self._backlog = set(refs)
        return refs, found

    def settle(self, found: set[WorkloadRef] | None, finished: Collection[WorkloadRef], now: datetime) -> None:
        """After a pass that LISTed: what is still pending joins the Lease's list; the overflow mark goes once the
        list holds it all."""
        if found is None or self.lease is None:
            return
        try:
            self.lease.settle(found - set(finished), now)
        except ReactorError as e:  # still marked: the next pass lists the workloads again
            log.warning("verification list not settled", extra={"error": str(e)})

    def leading(self) -> bool:
        """Does this replica verify now? Holding the Lease (as last read, no request), or without one."""
        return self.lease is None or self.lease.leading(self.clock())

    def pending_now(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            return {(): float(len(self._backlog | self._local))}

    def _scan_cache(self) -> set[WorkloadRef]:
        """The cached workloads whose annotations say a verification is pending (in memory, no request)."""
        assert self.cache is not None
        marked = VERIFICATION.encode()  # only objects carrying the annotation are decoded
        return {ref_of(kind, o) for kind in sorted(PATCHABLE_KINDS)
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
                found.update(ref_of(kind, o) for o in items if _pending(o))
        for adapter in self.adapters:
            try:
                custom = self.kube.list_cluster_custom(adapter.group, adapter.version, adapter.plural)
            except PermanentError as e:  # e.g. the operator's CRD is not installed: none of its kind to follow
                log.info("workloads not listed", extra={"kind": adapter.kind, "error": str(e)})
                continue
            found.update(ref_of(adapter.kind, o) for o in custom if _pending(o))
        return {r for r in found if self.policy.namespace_allowed(r.namespace)}


def _pending(obj: dict[str, Any]) -> bool:
    """The object's annotations say a verification is pending (unauthenticated: a candidate to read, no more)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(VERIFICATION)
    if not isinstance(raw, str):
        return False
    verification = read_state({VERIFICATION: raw}).verification
    return verification is not None and verification.result == PENDING


def ref_of(kind: str, obj: dict[str, Any]) -> WorkloadRef:
    meta = obj.get("metadata") or {}
    return WorkloadRef(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
