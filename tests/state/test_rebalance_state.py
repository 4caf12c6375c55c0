"""The sealed `rebalance` record (state/annotations.py, seal.py, writes.py): records sealed before it existed keep
their MAC, an edited record does not verify, and a later write of the workload keeps the record it read."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reactor.core.model import Action, Rebalance, Signal, Status, Workload, WorkloadRef
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, REBALANCE, VERIFICATION, read_state
from reactor.state.seal import STATE_MAC, StateKeys, authenticate
from reactor.state.writes import StateWrites

KEY = b"k" * 32
NOW = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
REF = WorkloadRef("Deployment", "ml", "training")
SIGNAL = Signal(alert="GPUIdle", status=Status.FIRING, keys=(("fp", "s"),), container="main", value=0.1,
                fingerprint="fp", starts_at="s")
GAVE = Rebalance("donor", "Deployment", "inference", "uid-inference", 2, "gpu-quota", NOW)


def _workload(annotations: dict[str, str]) -> Workload:
    w = Workload(ref=REF, resource_version="1", containers=(), replicas=2, annotations=annotations, uid="uid-training",
                 state=read_state(annotations))
    return authenticate(w, StateKeys(KEY))


def _action() -> Action:
    return Action("scale-replicas", "down", REF, None, 2, 1, "scale-replicas-down", gpu_delta=-2)


def test_a_record_without_rebalance_keeps_the_mac_it_was_sealed_with() -> None:
    """The MAC of a write without `rebalance` is the one sealed before the key existed: the four values only."""
    values = {LAST_ACTION: "{}", COOLDOWN_UNTIL: "2026-01-01T08:30:00Z", ORIGINAL: None, VERIFICATION: None}
    message = json.dumps(["v2", "uid", "0123456789abcdef", list(values.values())], separators=(",", ":"))
    before = "v2:0123456789abcdef:" + hmac.new(KEY, message.encode(), hashlib.sha256).hexdigest()
    assert StateKeys(KEY).mac("uid", values, write="0123456789abcdef") == before


def test_the_donor_record_is_sealed_kept_by_later_writes_and_cleared_by_the_give_back() -> None:
    writes = StateWrites(StateKeys(KEY), timedelta(minutes=30))
    sealed = writes.change(_action(), SIGNAL, _workload({}), NOW, rebalance=GAVE)
    first = _workload({k: v for k, v in sealed.items() if v is not None})
    assert first.state.rebalance == GAVE and not first.state.unauthenticated
    later = writes.change(_action(), SIGNAL, first, NOW + timedelta(hours=1))  # KEEP: the record stays, verified
    second = _workload({k: v for k, v in later.items() if v is not None})
    assert second.state.rebalance == GAVE and not second.state.unauthenticated
    cleared = writes.change(replace(_action(), action="revert", direction="revert"), SIGNAL, second, NOW,
                            rebalance=None)
    assert cleared[REBALANCE] is None
    third = _workload({k: v for k, v in cleared.items() if v is not None})
    assert third.state.rebalance is None and not third.state.unauthenticated


def test_an_edited_record_is_not_authentic() -> None:
    """A tenant who points the record at another receiver (or more GPUs) loses the whole state."""
    sealed = StateWrites(StateKeys(KEY), timedelta(minutes=30)).change(_action(), SIGNAL, _workload({}), NOW,
                                                                       rebalance=GAVE)
    edited = {k: v for k, v in sealed.items() if v is not None}
    edited[REBALANCE] = edited[REBALANCE].replace('"gpus":2', '"gpus":8')
    w = _workload(edited)
    assert w.state.rebalance is None and REBALANCE in w.state.unauthenticated and STATE_MAC in w.state.unauthenticated


def test_the_verifiers_revert_of_the_paid_growth_drops_the_receiver_record() -> None:
    """The growth a donor paid for, reverted because its rollout stalled: the receiver holds nothing of the donor's,
    so the revert's write drops its record (the donor is then restored); a stalled revert of any other change of
    the receiver keeps it."""
    writes = StateWrites(StateKeys(KEY), timedelta(minutes=30))
    grow = Action("scale-replicas", "up", REF, None, 2, 3, "scale-replicas-up", gpu_delta=2)
    received = Rebalance("receiver", "Deployment", "inference", "uid-inference", 2, "gpu-quota", NOW, paid=("fp", "s"))
    grown = _workload({k: v for k, v in writes.change(grow, SIGNAL, _workload({}), NOW, rebalance=received).items()
                       if v is not None})
    assert grown.state.rebalance == received and grown.state.verification is not None
    undo = replace(grow, action="revert", direction="down", from_value=3, to_value=2)
    stalled = writes.stalled_revert(undo, SIGNAL, grown, NOW, grown.state.verification, "rollout stalled")
    assert stalled[REBALANCE] is None
    other = Signal(alert="GPUSaturated", status=Status.FIRING, keys=(("fp2", "t"),), container="main", value=0.99,
                   fingerprint="fp2", starts_at="t")
    own = _workload({k: v for k, v in writes.change(grow, other, grown, NOW).items() if v is not None})
    kept = writes.stalled_revert(undo, other, own, NOW, own.state.verification, "rollout stalled")
    assert kept[REBALANCE] == grown.annotations[REBALANCE]
