"""The state ledger: the reactor's latest write per workload, kept where tenants cannot edit it.

The state MAC (state/seal.py) proves the reactor wrote a record for this uid, not that it is the latest:
a tenant who can patch its Deployment can put back an older record the reactor once signed (a replay), or
delete the record to make the reactor forget a cooldown and a revert. So every write also names itself
(`v2:<write>:<mac>`), and the ledger, an annotation on a Lease in the reactor's own namespace (RBAC: only
the reactor's ServiceAccount may update it), keeps for each uid the latest write, how long the record
matters, and a copy of the record itself (its signed values: what was changed, from what value, for which
firing, the cooldown, the originals, the verification, the rebalance). Pure: the codec and the verdict; the
Lease I/O is act/ledger.py's.

The verdict on a workload's verified record (`state.write`) against its entry:

- the entry's write: the record counts;
- no record while the entry is live (its cooldown or hysteresis window is not over, or a change of it still
  awaits its revert or verification): `removed`;
- any other record while the entry is live: `replayed`;
- no live entry: no record, or a `v1:` record from before the ledger, counts; a `v2:` record the ledger does
  not know is `unknown` where the ledger is authoritative (a Lease), and is then treated as absent: its
  windows are over (the entry was pruned) or it is older than the one the ledger lost.

When the ledger and the workload disagree (`judged`), the ledger wins: a replayed, removed or edited record
is replaced, for the policy, by the ledger's copy of the latest record, and the decision is made as if the
workload carried it (a resolve reverts the change the copy names; the copy's cooldown holds; nothing is
frozen). The reactor's next write puts its own record back on the workload. Only an entry without a copy
(written before copies were kept) still refuses: `stale-state` for a replay, `state-reset` for a removal,
until the latest record is back or the entry's windows end. A record the ledger does not know is dropped
(UNKNOWN); with no live entry the workload's own record counts (or, unauthenticated, is refused by the policy:
it is the tenant's own workload, and no record of the reactor's is at stake).

Two objects cannot be written at once, so the ledger is written first (an intent): the entry names the new
write, the entry it replaces and the workload's resourceVersion the workload's patch is conditional on. Until
the patch lands that old record still counts, but only while the workload's resourceVersion is that one: once
the patch lands it never is again (a resourceVersion never repeats), so a replay of the old record after
the write is refused, and a patch that failed is undone (`abort`) or, if its fate is unknown, still counts
while nothing touched the workload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from reactor.core.model import EMPTY, Workload
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, PREFIX, REBALANCE, VERIFICATION, read_state
from reactor.state.seal import LEGACY, SIGNED, STATE_MAC

LEDGER_KEY = PREFIX + "state-ledger"  # the annotation on the ledger's Lease
# Upstream limits an object's annotations to 256 KiB in all (apimachinery pkg/api/validation/objectmeta.go,
# ValidateAnnotationsSize, TotalAnnotationSizeLimitB); the ledger stays well under it.
MAX_BYTES = 200_000
COUNTS, REPLAYED, REMOVED, UNKNOWN = "", "replayed", "removed", "unknown"
# The copy's keys in the ledger: short, as the whole ledger of every workload shares one object's 256 KiB.
_SHORT = {LAST_ACTION: "a", COOLDOWN_UNTIL: "c", ORIGINAL: "o", VERIFICATION: "v", REBALANCE: "r"}
_LONG = {short: key for key, short in _SHORT.items()}
Record = Mapping[str, str]  # a record's signed annotations (seal.SIGNED) as written, absent keys left out


@dataclass(frozen=True, slots=True)
class Entry:
    """The latest write of one uid; `prev` and `rv` only while that write's patch may not have landed."""

    write: str
    keep: datetime  # missing state before this is a reset (the record's cooldown and hysteresis windows)
    open: bool  # a change of the record awaits its revert or its verification: kept, whatever `keep` says
    prev: Entry | None = None
    rv: str = ""
    # The record the write carried (its signed values), the reactor's own copy; None in an entry written before
    # copies were kept.
    record: Record | None = None

    def live(self, now: datetime) -> bool:
        return self.open or now < self.keep


def verdict(write: str | None, entry: Entry | None, resource_version: str, now: datetime, *,
            authoritative: bool) -> str:
    """COUNTS, REPLAYED, REMOVED or UNKNOWN for a workload whose verified record names `write` (None: no
    record, LEGACY: a `v1:` record) at `resource_version`, given its ledger entry."""
    if entry is not None and entry.rv and resource_version == entry.rv:
        if write is not None and write == entry.write:
            return COUNTS
        return verdict(write, entry.prev, resource_version, now, authoritative=authoritative)  # not landed (yet)
    if entry is None or not entry.live(now):
        if write is None or write == LEGACY or not authoritative:
            return COUNTS
        return UNKNOWN
    if write is not None and write == entry.write:
        return COUNTS
    return REMOVED if write is None else REPLAYED


def expected(entry: Entry | None, resource_version: str) -> Entry | None:
    """The entry whose record the workload should carry at `resource_version`: while the workload is still at the
    version an intent's patch was conditional on, that patch has not landed and the entry it replaces is it."""
    if entry is not None and entry.rv and resource_version == entry.rv:
        return entry.prev
    return entry


def judged(workload: Workload, found: str, entry: Entry | None = None) -> Workload:
    """The workload as the policy may see it after the verdict `found`, `entry` being the one the verdict expected
    (`expected`): the record kept (COUNTS); replaced by the entry's copy (REPLAYED, REMOVED: the ledger wins);
    dropped with the reason the policy refuses on, where the entry has no copy; dropped silently (UNKNOWN)."""
    if found == COUNTS:
        return workload
    if found in (REPLAYED, REMOVED) and entry is not None and entry.record is not None:
        return restored(workload, entry.write, entry.record)
    state = replace(workload.state, last_action=None, cooldown_until=None, original=EMPTY, verification=None,
                    not_latest=found)
    return replace(workload, state=state)


def restored(workload: Workload, write: str, record: Record) -> Workload:
    """The workload carrying the reactor's own record instead of what its annotations hold: the signed
    annotations replaced by the copy's (so what a write keeps, like `rebalance`, is the reactor's too), the state
    parsed from them, trusted (only the reactor writes the ledger), and named by its write."""
    annotations = {k: v for k, v in workload.annotations.items() if k not in SIGNED and k != STATE_MAC}
    annotations.update({k: v for k, v in record.items() if k in SIGNED})
    own = read_state({k: v for k, v in annotations.items() if k in SIGNED})
    state = replace(workload.state, last_action=own.last_action, cooldown_until=own.cooldown_until,
                    original=own.original, verification=own.verification, rebalance=own.rebalance,
                    unauthenticated=(), not_latest="", write=write,
                    invalid=tuple(sorted({k for k in workload.state.invalid if k not in SIGNED} | set(own.invalid))))
    return replace(workload, annotations=annotations, state=state)


def decode(raw: object) -> dict[str, Entry]:
    """The entries of the ledger annotation; an unreadable one is an empty ledger (only the reactor writes it)."""
    try:
        doc = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    entries = {}
    for uid, item in (doc.items() if isinstance(doc, dict) else ()):
        entry = _entry(item)
        if isinstance(uid, str) and entry is not None:
            entries[uid] = entry
    return entries


def encode(entries: Mapping[str, Entry]) -> str:
    return json.dumps({uid: _doc(e) for uid, e in sorted(entries.items())}, separators=(",", ":"))


def with_entry(entries: Mapping[str, Entry], uid: str, entry: Entry, now: datetime) -> dict[str, Entry]:
    """`entries` with `uid`'s entry replaced, dead entries dropped, and the whole under MAX_BYTES: past it the
    entries that matter least go first (closed before open, then the earliest `keep`)."""
    kept = {u: e for u, e in entries.items() if u != uid and e.live(now)}
    kept[uid] = entry
    sizes = {u: len(json.dumps({u: _doc(e)}, separators=(",", ":"))) - 1 for u, e in kept.items()}  # `"u":{..},`
    total = sum(sizes.values()) + 1
    for victim in sorted((u for u in kept if u != uid), key=lambda u: (kept[u].open, kept[u].keep)):
        if total <= MAX_BYTES:
            break
        total -= sizes[victim]
        del kept[victim]
    return kept


def record_of(annotations: Mapping[str, str | None]) -> dict[str, str]:
    """The copy the ledger keeps of a record about to be written: its signed values (None, a deletion, left out)."""
    return {k: v for k in SIGNED if isinstance(v := annotations.get(k), str)}


def _doc(entry: Entry) -> dict[str, Any]:
    doc: dict[str, Any] = {"w": entry.write, "k": int(entry.keep.timestamp()), "o": int(entry.open)}
    if entry.record is not None:
        doc["s"] = {_SHORT[k]: v for k, v in sorted(entry.record.items()) if k in _SHORT}
    if entry.rv:
        doc["rv"] = entry.rv
        doc["p"] = None if entry.prev is None else _doc(replace(entry.prev, prev=None, rv=""))
    return doc


def _entry(item: object, *, nested: bool = False) -> Entry | None:
    if not isinstance(item, dict):
        return None
    write, keep, open_, rv = item.get("w"), item.get("k"), item.get("o"), item.get("rv", "")
    if not isinstance(write, str) or not isinstance(keep, int) or open_ not in (0, 1) or not isinstance(rv, str):
        return None
    try:
        moment = datetime.fromtimestamp(keep, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    prev = _entry(item.get("p"), nested=True) if rv and not nested else None
    return Entry(write, moment, bool(open_), prev, rv if not nested else "", _record(item.get("s")))


def _record(doc: object) -> Record | None:
    """The copy in an entry; None when absent or not the reactor's shape (then the entry refuses, as before)."""
    if not isinstance(doc, dict) or not all(k in _LONG and isinstance(v, str) for k, v in doc.items()):
        return None
    return MappingProxyType({_LONG[k]: v for k, v in doc.items()})
