"""The state ledger (reactor/state/ledger_codec.py, reactor/act/ledger.py): the verdict on a record, the intent written
before each patch, the codec and its bound, and the Lease store against the embedded cluster (two replicas)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reactor.act.ledger import LeaseLedger, MemoryLedger, StaleRecord, entry_for
from reactor.cluster.kube import KubeGateway
from reactor.core.model import Container, Workload, WorkloadRef
from reactor.state.annotations import (
    COOLDOWN_UNTIL,
    LAST_ACTION,
    ORIGINAL,
    VERIFICATION,
    read_state,
    verification_annotation,
)
from reactor.state.ledger_codec import (
    COUNTS,
    LEDGER_KEY,
    MAX_BYTES,
    REMOVED,
    REPLAYED,
    UNKNOWN,
    Entry,
    decode,
    encode,
    expected,
    judged,
    verdict,
    with_entry,
)
from reactor.state.seal import LEGACY
from tests import cluster_builder as build
from tests.support import kube_gateway

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
A, B, C = "a" * 16, "b" * 16, "c" * 16


def _verdict(write: str | None, entry: Entry | None, rv: str = "7", *, authoritative: bool = True) -> str:
    return verdict(write, entry, rv, NOW, authoritative=authoritative)


@pytest.mark.parametrize(("write", "entry", "rv", "expected"), [
    (B, Entry(B, LATER, False), "7", COUNTS),
    (A, Entry(B, LATER, False), "7", REPLAYED),
    (LEGACY, Entry(B, LATER, False), "7", REPLAYED),
    (None, Entry(B, LATER, False), "7", REMOVED),
    (None, Entry(B, NOW - timedelta(seconds=1), True), "7", REMOVED),  # open: a revert or verification awaits
    (None, Entry(B, NOW - timedelta(seconds=1), False), "7", COUNTS),  # windows over: a fresh start
    (A, Entry(B, NOW - timedelta(seconds=1), False), "7", UNKNOWN),  # a record the ledger let go of: absent
    (None, None, "7", COUNTS),
    (LEGACY, None, "7", COUNTS),  # written before the ledger: believed until the next write
    (A, None, "7", UNKNOWN),
    # The intent: B's patch was conditional on resourceVersion 7. At 7 it has not landed: A still counts.
    (A, Entry(B, LATER, True, Entry(A, LATER, True), "7"), "7", COUNTS),
    (B, Entry(B, LATER, True, Entry(A, LATER, True), "7"), "8", COUNTS),
    # ... past 7 (landed, then A put back): A is a replay. A resourceVersion never repeats.
    (A, Entry(B, LATER, True, Entry(A, LATER, True), "7"), "9", REPLAYED),
    (None, Entry(B, LATER, True, None, "7"), "7", COUNTS),  # the first write, not landed: nothing was there
    (None, Entry(B, LATER, True, None, "7"), "8", REMOVED),
], ids=["latest", "older", "legacy-after-a-write", "removed-in-window", "removed-while-open", "removed-after-window",
        "unknown-after-window", "never-touched", "legacy", "unknown", "intent-not-landed", "intent-landed",
        "replay-after-landing", "first-intent-not-landed", "first-intent-landed-then-removed"])
def test_the_verdict(write: str | None, entry: Entry | None, rv: str, expected: str) -> None:
    assert _verdict(write, entry, rv) == expected


def test_in_memory_a_record_first_seen_is_believed() -> None:
    assert _verdict(A, None, authoritative=False) == COUNTS
    assert _verdict(A, Entry(B, LATER, False), authoritative=False) == REPLAYED


def test_the_codec_round_trips_and_refuses_garbage() -> None:
    entries = {"uid-1": Entry(A, LATER, True), "uid-2": Entry(B, LATER, False, Entry(A, LATER, True), "42"),
               "uid-3": Entry(C, LATER, False, None, "5")}
    assert decode(encode(entries)) == entries
    assert decode("not json") == {} and decode(None) == {} and decode("[1]") == {}
    assert decode('{"u": {"w": 1, "k": 2, "o": 0}, "v": {"w": "x", "k": 99999999999999999, "o": 0}}') == {}


def test_dead_entries_go_and_the_whole_stays_under_its_bound() -> None:
    entries = {f"uid-{i:05d}": Entry(A, LATER + timedelta(seconds=i), i % 2 == 0) for i in range(6000)}
    entries["dead"] = Entry(B, NOW - timedelta(seconds=1), False)
    kept = with_entry(entries, "new", Entry(C, LATER, False), NOW)
    assert "dead" not in kept and kept["new"].write == C
    assert len(encode(kept)) <= MAX_BYTES
    dropped = set(entries) - set(kept) - {"dead"}
    assert dropped and all(not entries[u].open for u in dropped), "closed entries go before open ones"


def test_an_entry_is_open_while_a_revert_or_a_verification_awaits() -> None:
    pending = verification_annotation("pending", "scale-replicas-up", NOW)
    cooldown = (NOW + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = entry_for({COOLDOWN_UNTIL: cooldown, ORIGINAL: None, VERIFICATION: pending}, A, NOW, timedelta(hours=2))
    assert (entry.open, entry.keep) == (True, NOW + timedelta(hours=2))
    closed = entry_for({COOLDOWN_UNTIL: cooldown, ORIGINAL: None, VERIFICATION: None}, A, NOW, timedelta(0))
    assert (closed.open, closed.keep) == (False, NOW + timedelta(minutes=30))
    assert entry_for({ORIGINAL: '{"replicas": 3}'}, A, NOW, timedelta(0)).open


def _workload(write: str | None, rv: str, uid: str = "uid-1") -> Workload:
    state = read_state({})
    return Workload(ref=WorkloadRef("Deployment", "ml", "w"), resource_version=rv, containers=(Container("c", 1),),
                    state=replace(state, write=write), annotations={}, uid=uid)


def test_memory_ledger_intent_and_abort() -> None:
    ledger = MemoryLedger()
    ledger.begin(_workload(None, "1"), COUNTS, Entry(A, LATER, True), NOW)
    assert ledger.judge(_workload(A, "2"), NOW).state.not_latest == ""
    ledger.begin(_workload(A, "2"), COUNTS, Entry(B, LATER, True), NOW)
    assert ledger.judge(_workload(A, "3"), NOW).state.not_latest == REPLAYED
    ledger.abort("uid-1", B, NOW)  # B's patch was refused (409): A is the latest again
    assert ledger.judge(_workload(A, "3"), NOW).state.not_latest == ""
    with pytest.raises(StaleRecord):  # a decision made on a record that is not the latest any more
        ledger.begin(_workload(C, "4"), COUNTS, Entry(B, LATER, True), NOW)


@pytest.fixture
def kube() -> Iterator[KubeGateway]:
    with build.start(build.namespace("gpu-reactor"), settle=False) as sim, kube_gateway(sim) as gateway:
        yield gateway


def test_two_replicas_share_the_lease_and_a_stale_copy_never_writes(kube: KubeGateway) -> None:
    """Replica b decided on record A from its copy; replica a has since written B. b's intent (conditional on the
    Lease it read) is a 409, the Lease is read again, and the decision is refused (StaleRecord): never written."""
    clock = [0.0]
    a = LeaseLedger(kube, namespace="gpu-reactor", name="gpu-reactor-state", clock=lambda: clock[0])
    b = LeaseLedger(kube, namespace="gpu-reactor", name="gpu-reactor-state", clock=lambda: clock[0])
    a.begin(_workload(None, "1"), COUNTS, Entry(A, LATER, True), NOW)  # creates the Lease
    assert b.entry("uid-1") == a.entry("uid-1")
    a.begin(_workload(A, "2"), COUNTS, Entry(B, LATER, True), NOW)
    # b's copy is under FRESH_SECONDS old: its decision may count A, but its intent is conditional on that copy:
    assert b.judge(_workload(A, "3"), NOW).state.not_latest == ""
    with pytest.raises(StaleRecord):
        b.begin(_workload(A, "3"), COUNTS, Entry(C, LATER, True), NOW)
    assert b.judge(_workload(A, "3"), NOW).state.not_latest == REPLAYED  # the 409 made it read the Lease again
    lease = kube.get_lease("gpu-reactor", "gpu-reactor-state")
    assert decode(lease["metadata"]["annotations"][LEDGER_KEY])["uid-1"].write == B
    a.abort("uid-1", B, NOW)
    clock[0] += 5  # b's copy is old: read again before it is believed
    assert b.judge(_workload(A, "3"), NOW).state.not_latest == ""


# --- the reactor's own copy: when the ledger and the workload disagree, the ledger wins -----------------------

LAST = ('{"action":"scale-replicas","alert":"GPUSaturated","container":null,"direction":"up","fingerprint":"f1",'
        '"from":3,"startsAt":"2026-06-01T11:00:00Z","time":"2026-06-01T11:01:00Z","to":4}')
COPY = {LAST_ACTION: LAST, COOLDOWN_UNTIL: "2026-06-01T11:31:00Z", ORIGINAL: '{"replicas":3}'}
OLDER = ('{"action":"scale-replicas","alert":"GPUSaturated","container":null,"direction":"up","fingerprint":"f0",'
         '"from":1,"startsAt":"2026-05-01T11:00:00Z","time":"2026-05-01T11:01:00Z","to":2}')


def _carrying(write: str | None, rv: str, annotations: dict[str, str], *, unauthenticated: bool = False) -> Workload:
    """A workload whose verified record names `write` and holds `annotations` (as seal.authenticate leaves it)."""
    state = read_state(annotations)
    if unauthenticated:
        state = replace(state, last_action=None, cooldown_until=None, original=read_state({}).original,
                        unauthenticated=tuple(sorted(annotations)))
    return Workload(ref=WorkloadRef("Deployment", "ml", "w"), resource_version=rv, containers=(Container("c", 1),),
                    state=replace(state, write=write), annotations={**annotations, "gpu-reactor.io/mode": "enforce"},
                    uid="uid-1")


def _seen(workload: Workload, entry: Entry | None) -> Workload:
    found = verdict(workload.state.write, entry, workload.resource_version, NOW, authoritative=True)
    return judged(workload, found, expected(entry, workload.resource_version))


@pytest.mark.parametrize(("workload", "entry", "seen"), [
    (_carrying(B, "7", COPY), Entry(B, LATER, True, record=COPY), "own"),
    (_carrying(A, "7", {LAST_ACTION: OLDER}), Entry(B, LATER, True, record=COPY), "copy"),
    (_carrying(None, "7", {}), Entry(B, LATER, True, record=COPY), "copy"),
    (_carrying(None, "7", {LAST_ACTION: OLDER}, unauthenticated=True), Entry(B, LATER, True, record=COPY), "copy"),
    (_carrying(None, "7", {LAST_ACTION: OLDER}, unauthenticated=True), None, "unauthenticated"),
    (_carrying(A, "7", {LAST_ACTION: OLDER}), Entry(B, LATER, True), REPLAYED),
    (_carrying(None, "7", {}), Entry(B, LATER, True), REMOVED),
    (_carrying(C, "7", {LAST_ACTION: OLDER}), Entry(B, LATER, True, Entry(A, LATER, True, record=COPY), "7"), "copy"),
    (_carrying(A, "7", {LAST_ACTION: OLDER}), Entry(B, NOW - timedelta(seconds=1), False, record=COPY), UNKNOWN),
], ids=["the-latest-on-the-workload", "older-record-put-back", "record-removed", "record-edited",
        "edited-with-no-live-entry", "older-put-back-no-copy", "removed-no-copy", "intent-not-landed-prev-copy",
        "entry-over"])
def test_what_the_policy_sees(workload: Workload, entry: Entry | None, seen: str) -> None:
    """Each case of the ledger and the workload disagreeing (state/ledger_codec.py): the copy wins where the entry
    is live and holds one; an entry without a copy still refuses; a record the ledger let go of is no record."""
    judged_ = _seen(workload, entry)
    if seen == "own":
        assert judged_ == workload
    elif seen == "copy":
        assert judged_.state.last_action is not None and judged_.state.last_action.fingerprint == "f1"
        assert judged_.state.original == {"replicas": 3} and judged_.state.not_latest == ""
        assert judged_.state.unauthenticated == () and judged_.state.write in (A, B)
        assert judged_.annotations[LAST_ACTION] == LAST and judged_.annotations["gpu-reactor.io/mode"] == "enforce"
        assert judged_.annotations.get(VERIFICATION) is None
    elif seen == "unauthenticated":
        assert judged_.state.unauthenticated == (LAST_ACTION,) and judged_.state.last_action is None
    else:
        assert judged_.state.not_latest == seen and judged_.state.last_action is None


def test_a_write_keeps_its_copy_through_begin_and_the_codec() -> None:
    """The entry `entry_for` builds holds the record's signed values (a deletion left out), `begin` keeps it, and
    the ledger annotation carries it (an entry without one, or with one of another shape, decodes without)."""
    entry = entry_for({**COPY, VERIFICATION: None, "gpu-reactor.io/state-mac": "v2:x"}, A, NOW, timedelta(0))
    assert dict(entry.record or {}) == COPY
    ledger = MemoryLedger()
    ledger.begin(_workload(None, "1"), COUNTS, entry, NOW)
    assert dict(ledger.entry("uid-1").record or {}) == COPY  # type: ignore[union-attr]
    entries = {"uid-1": replace(entry, prev=Entry(B, LATER, True, record={ORIGINAL: "{}"}), rv="9")}
    assert decode(encode(entries)) == entries
    assert decode('{"u":{"w":"a","k":1,"o":0,"s":{"zz":"x"}}}')["u"].record is None


def test_the_memory_ledger_hands_over_its_copy_while_it_runs() -> None:
    ledger = MemoryLedger()
    ledger.begin(_workload(None, "1"), COUNTS, Entry(B, LATER, True, record=COPY), NOW)
    seen = ledger.judge(_carrying(None, "2", {}), NOW)
    assert seen.state.write == B and seen.state.cooldown_until == datetime(2026, 6, 1, 11, 31, tzinfo=UTC)
    # Decided on the copy, the write that follows is not a StaleRecord.
    ledger.begin(seen, seen.state.not_latest, Entry(C, LATER, True, record=COPY), NOW)
