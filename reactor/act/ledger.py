"""Where the state ledger (state/ledger_codec.py) lives: a Lease in the reactor's own namespace, or this process.

`LeaseLedger` keeps it in an annotation of one named Lease (`state.ledgerName` in `verify.leaseNamespace`;
RBAC: get and update on that name only, create on leases, in the reactor's namespace: a tenant cannot edit
it). It is authoritative: a signed record it does not know is treated as absent. Verdicts are taken from a
copy at most `FRESH_SECONDS` old (one GET a second at most, whatever the traffic), and a refusal is confirmed
on a fresh read; every write (`begin`, `abort`) is conditional on the resourceVersion it read, and `begin`
checks, on the Lease as that write finds it, that the record the decision was made on is still the one that
counts (another replica may have written since): otherwise `StaleRecord`, and the act step re-reads.

`MemoryLedger` (`state.ledgerName: null`, one replica) keeps it in this process: while it runs, a replayed or
removed record is replaced by its copy as the Lease's would be; after a restart the first record seen of each
workload is believed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from reactor.cluster.kube import KubeGateway, NotFound
from reactor.core.errors import ConflictError, ReactorError, TemporaryError
from reactor.core.model import Workload
from reactor.state.annotations import COOLDOWN_UNTIL, ORIGINAL, PENDING, VERIFICATION, parse_time, read_state
from reactor.state.ledger_codec import (
    COUNTS,
    LEDGER_KEY,
    Entry,
    decode,
    encode,
    expected,
    judged,
    record_of,
    verdict,
    with_entry,
)

log = logging.getLogger(__name__)

FRESH_SECONDS = 1.0
_TRIES = 5


class StaleRecord(ReactorError):
    """The record a decision was made on no longer counts (the ledger moved on): re-read and decide again."""


def entry_for(annotations: Mapping[str, str | None], write: str, now: datetime, reverse_after: timedelta) -> Entry:
    """The ledger entry of a record about to be written, with the reactor's own copy of it: kept until its cooldown
    and hysteresis windows are over, and open while it holds an original value or a pending verification."""
    keep = now + reverse_after
    raw = annotations.get(COOLDOWN_UNTIL)
    if raw is not None:
        keep = max(keep, parse_time(raw))
    pending = annotations.get(VERIFICATION)
    verification = read_state({VERIFICATION: pending}).verification if pending is not None else None
    open_ = annotations.get(ORIGINAL) is not None or (verification is not None and verification.result == PENDING)
    return Entry(write, keep, open_, record=record_of(annotations))


class Ledger:
    """The interface both stores share; `judge` is what the deciding code calls."""

    authoritative = False

    def entry(self, uid: str, *, fresh: bool = False) -> Entry | None:
        raise NotImplementedError

    def judge(self, workload: Workload, now: datetime) -> Workload:
        """The workload as the policy decides on it: its record where it is the reactor's latest, else the
        ledger's copy of the latest (state/ledger_codec.py `judged`); a disagreement is confirmed on a fresh read
        first. What the engine and the verifier call before every decision."""
        if not workload.uid:
            return workload
        entry = self.entry(workload.uid)
        found = self._verdict(workload, entry, now)
        if found != COUNTS:
            entry = self.entry(workload.uid, fresh=True)
            found = self._verdict(workload, entry, now)
        return judged(workload, found, expected(entry, workload.resource_version))

    def _verdict(self, workload: Workload, entry: Entry | None, now: datetime) -> str:
        return verdict(workload.state.write, entry, workload.resource_version, now, authoritative=self.authoritative)

    def begin(self, workload: Workload, decided: str, new: Entry, now: datetime) -> None:
        """Record `new` as the uid's latest write before its patch is sent; StaleRecord when the verdict on the
        workload's record is no longer `decided` (the one the decision was made on)."""
        raise NotImplementedError

    def abort(self, uid: str, write: str, now: datetime) -> None:
        """The patch of `write` did not land: its entry gives way to the one it replaced."""
        raise NotImplementedError

    def _next(self, entries: Mapping[str, Entry], workload: Workload, decided: str, new: Entry,
              now: datetime) -> dict[str, Entry]:
        old = entries.get(workload.uid)
        if self._verdict(workload, old, now) != decided:
            raise StaleRecord(f"the reactor's record of {workload.ref} changed since it was read")
        if old is not None and old.rv == workload.resource_version:
            old = old.prev  # a write at this very version never landed: the one before it is what is there
        prev = old if old is not None and old.live(now) else None
        return with_entry(entries, workload.uid, replace(new, prev=prev, rv=workload.resource_version), now)

    @staticmethod
    def _undone(entries: Mapping[str, Entry], uid: str, write: str, now: datetime) -> dict[str, Entry] | None:
        entry = entries.get(uid)
        if entry is None or entry.write != write or not entry.rv:
            return None  # not (or no longer) this write's intent: nothing to undo
        kept = dict(entries)
        if entry.prev is not None and entry.prev.live(now):
            kept[uid] = entry.prev
        else:
            del kept[uid]
        return kept


class MemoryLedger(Ledger):
    """This process's ledger (one replica, no Lease): believed on first sight after a restart."""

    authoritative = False

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    def entry(self, uid: str, *, fresh: bool = False) -> Entry | None:
        # No lock: asked before every decision, and `_entries` is replaced whole by the writers below.
        return self._entries.get(uid)

    def begin(self, workload: Workload, decided: str, new: Entry, now: datetime) -> None:
        with self._lock:
            self._entries = self._next(self._entries, workload, decided, new, now)

    def abort(self, uid: str, write: str, now: datetime) -> None:
        with self._lock:
            undone = self._undone(self._entries, uid, write, now)
            if undone is not None:
                self._entries = undone


class LeaseLedger(Ledger):
    """The ledger in an annotation of one Lease in the reactor's namespace (authoritative)."""

    authoritative = True

    def __init__(self, kube: KubeGateway, *, namespace: str, name: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube, self.namespace, self.name, self._clock = kube, namespace, name, clock
        self._lease: dict[str, Any] | None = None  # as last read or written
        self._entries: dict[str, Entry] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def entry(self, uid: str, *, fresh: bool = False) -> Entry | None:
        if not fresh and self._clock() - self._read_at < FRESH_SECONDS:
            return self._entries.get(uid)  # no lock: asked before every decision; `_entries` is replaced whole
        with self._lock:
            if fresh or self._clock() - self._read_at >= FRESH_SECONDS:
                self._read()
            return self._entries.get(uid)

    def begin(self, workload: Workload, decided: str, new: Entry, now: datetime) -> None:
        self._change(lambda entries: self._next(entries, workload, decided, new, now))

    def abort(self, uid: str, write: str, now: datetime) -> None:
        try:
            self._change(lambda entries: self._undone(entries, uid, write, now))
        except ReactorError as e:  # left as an intent: the old record still counts while the workload is untouched
            log.warning("state ledger intent not undone", extra={"uid": uid, "error": str(e)})

    def _change(self, change: Callable[[dict[str, Entry]], dict[str, Entry] | None]) -> None:
        """Read-modify-write, conditional on the resourceVersion read; a 409 means read again and redo."""
        with self._lock:
            for attempt in range(_TRIES):
                if attempt or self._lease is None or self._clock() - self._read_at >= FRESH_SECONDS:
                    self._read()
                entries = change(dict(self._entries))
                if entries is None:
                    return
                if self._write(entries):
                    return
        raise TemporaryError(f"state ledger {self.namespace}/{self.name} kept changing ({_TRIES} conflicts)")

    def _read(self) -> None:
        try:
            self._lease = self.kube.get_lease(self.namespace, self.name)
        except NotFound:
            self._lease = None
        meta = (self._lease or {}).get("metadata") or {}
        self._entries = decode((meta.get("annotations") or {}).get(LEDGER_KEY))
        self._read_at = self._clock()

    def _write(self, entries: dict[str, Entry]) -> bool:
        try:
            if self._lease is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace,
                                     "annotations": {LEDGER_KEY: encode(entries)}}, "spec": {}}
                self._lease = self.kube.create_lease(self.namespace, body)
            else:
                meta = self._lease.get("metadata") or {}
                annotations = {**(meta.get("annotations") or {}), LEDGER_KEY: encode(entries)}
                self._lease = self.kube.update_lease(self.namespace, self.name,
                                                     {**self._lease, "metadata": {**meta, "annotations": annotations}})
        except ConflictError:  # another replica wrote (or created it) first
            return False
        except Exception:
            self._read_at = float("-inf")  # not known what the server holds now: read before trusting the copy
            raise
        self._entries, self._read_at = entries, self._clock()
        return True
