"""The state ledger: the reactor's latest write per workload, kept where tenants cannot edit it.

The state MAC (state/seal.py) proves the reactor wrote a record for this uid, not that it is the latest:
a tenant who can patch its Deployment can put back an older record the reactor once signed (a replay), or
delete the record to make the reactor forget a cooldown and a revert. So every write also names itself
(`v2:<write>:<mac>`), and the ledger, an annotation on a Lease in the reactor's own namespace (RBAC: only
the reactor's ServiceAccount may update it), keeps for each uid the latest write and how long the record
matters. Pure: the codec and the verdict; the Lease I/O is act/ledger.py's.

The verdict on a workload's verified record (`state.write`) against its entry:

- the entry's write: the record counts;
- no record while the entry is live (its cooldown or hysteresis window is not over, or a change of it still
  awaits its revert or verification): `removed`, a reset the policy refuses (`state-reset`);
- any other record while the entry is live: `replayed` (`stale-state`);
- no live entry: no record, or a `v1:` record from before the ledger, counts; a `v2:` record the ledger does
  not know is `unknown` where the ledger is authoritative (a Lease), and is then treated as absent: its
  windows are over (the entry was pruned) or it is older than the one the ledger lost.

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
from typing import Any

from reactor.core.model import EMPTY, Workload
from reactor.state.annotations import PREFIX
from reactor.state.seal import LEGACY

LEDGER_KEY = PREFIX + "state-ledger"  # the annotation on the ledger's Lease
# Upstream limits an object's annotations to 256 KiB in all (apimachinery pkg/api/validation/objectmeta.go,
# ValidateAnnotationsSize, TotalAnnotationSizeLimitB); the ledger stays well under it.
MAX_BYTES = 200_000
COUNTS, REPLAYED, REMOVED, UNKNOWN = "", "replayed", "removed", "unknown"


@dataclass(frozen=True, slots=True)
class Entry:
    """The latest write of one uid; `prev` and `rv` only while that write's patch may not have landed."""

    write: str
    keep: datetime  # missing state before this is a reset (the record's cooldown and hysteresis windows)
    open: bool  # a change of the record awaits its revert or its verification: kept, whatever `keep` says
    prev: Entry | None = None
    rv: str = ""

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


def judged(workload: Workload, found: str) -> Workload:
    """The workload as the policy may see it after the verdict `found`: the record kept (COUNTS), dropped
    silently (UNKNOWN), or dropped with the reason the policy refuses on (REPLAYED, REMOVED)."""
    if found == COUNTS:
        return workload
    state = replace(workload.state, last_action=None, cooldown_until=None, original=EMPTY, verification=None,
                    not_latest=found)
    return replace(workload, state=state)


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


def _doc(entry: Entry) -> dict[str, Any]:
    doc: dict[str, Any] = {"w": entry.write, "k": int(entry.keep.timestamp()), "o": int(entry.open)}
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
    return Entry(write, moment, bool(open_), prev, rv if not nested else "")
