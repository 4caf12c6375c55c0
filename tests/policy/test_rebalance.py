"""The pure half of rebalancing (reactor/policy/rebalance.py): the GPU quota refusal's shortfall, each candidate's
verdict with its reason, the ranking of donors, what a donor's change frees, and the donor's give-back."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from types import MappingProxyType

from reactor.core.model import (
    Action,
    Mode,
    Quota,
    Rebalance,
    ScopeTerm,
    Shortfall,
    Skip,
    SkipReason,
    Workload,
    WorkloadRef,
)
from reactor.policy import decide, decide_given_back
from reactor.policy.rebalance import Candidate, Verdict, freed, no_donor, qualify, ranked
from reactor.state.annotations import REBALANCE, read_state, rebalance_annotation
from tests.policy.policy_builders import NOW, POLICY, bounds, last_action, signal, workload

SHORT = Shortfall("gpu-quota", need=4, headroom=0)
BOUNDS = bounds(hard=16, used=16)
OPTED = {"gpu-reactor.io/donor": "true"}


def _named(w: Workload, name: str) -> Workload:
    return replace(w, ref=WorkloadRef(w.ref.kind, w.ref.namespace, name))


def _receiver(priority: str = "high-priority-gpu") -> Workload:
    return _named(workload(priority=priority, replicas=2, gpus=2), "inference")


def _donor(name: str = "training", *, replicas: int = 2, gpus: int = 4, priority: str | None = "medium-priority-gpu",
           annotations: dict[str, str] | None = None, value: float = 0.1, alert: str = "GPUIdle",
           mode: Mode = Mode.ENFORCE, labels: dict[str, str] | None = None) -> Candidate:
    w = _named(workload(replicas=replicas, gpus=gpus, priority=priority,
                        annotations=OPTED if annotations is None else annotations), name)
    sig = signal(alert, value=value)
    return Candidate(w, sig, labels or {}, mode, decide(sig, w, BOUNDS, POLICY, NOW))


def _verdict(c: Candidate, **kw: object) -> Verdict:
    policy = kw.pop("policy", POLICY)
    return qualify(c, receiver=_receiver(**kw), shortfall=SHORT, bounds=BOUNDS, policy=policy, now=NOW)  # type: ignore


def test_a_gpu_quota_refusal_says_which_quota_and_how_much_is_missing() -> None:
    """scale-replicas-up of 2 × 4 GPUs needs 4 more GPUs; the quota shows 1: 3 are missing."""
    w = workload(replicas=2, gpus=4)
    skip = decide(signal("GPUSaturated", value=0.95), w, bounds(hard=9, used=8), POLICY, NOW)
    assert isinstance(skip, Skip) and skip.reason is SkipReason.QUOTA_EXCEEDED
    assert skip.shortfall == Shortfall("gpu-quota", 4, 1) and skip.shortfall.gpus == 3


def test_a_refusal_that_is_not_the_gpu_quota_has_no_shortfall() -> None:
    w = workload(replicas=10, gpus=8, priority="high-priority-gpu")
    skip = decide(signal("GPUSaturated", value=0.95), w, bounds(hard=100), POLICY, NOW)
    assert isinstance(skip, Skip) and skip.reason is not SkipReason.QUOTA_EXCEEDED and skip.shortfall is None


def test_an_idle_opted_in_donor_of_lower_priority_qualifies_with_what_it_frees() -> None:
    """GPUIdle → scale-replicas-down 2→1 of a 4-GPU pod frees 4 GPUs: exactly the shortfall."""
    v = _verdict(_donor())
    assert v.qualifies and v.freed == 4
    assert v.reason == "scale-replicas-down 2→1 frees 4 GPUs of quota gpu-quota"


def test_each_failed_condition_is_named() -> None:
    assert _verdict(_donor("inference")).reason == "is the receiver"
    assert _verdict(_donor(annotations={})).reason == 'not opted in (annotation gpu-reactor.io/donor: "true")'
    assert _verdict(_donor(priority="high-priority-gpu"), priority="medium-priority-gpu").reason == (
        "priority high-priority-gpu is higher than the receiver's medium-priority-gpu")
    assert _verdict(_donor(mode=Mode.RECOMMEND)).reason == "mode recommend: a donor must be in enforce"
    assert _verdict(_donor(replicas=1)).reason.startswith("its own decision on GPUIdle: ")
    assert "at-min-replicas" in _verdict(_donor(replicas=1)).reason
    assert _verdict(_donor(gpus=2)).reason == "scale-replicas-down 2→1 frees 2 GPUs of quota gpu-quota, 4 are missing"
    up = _donor(alert="GPUSaturated", value=0.99)
    assert not _verdict(up).qualifies


def test_a_donor_in_cooldown_does_not_give() -> None:
    """Every rail of its own applies: a donor that just changed (another receiver took it) is in cooldown."""
    v = _verdict(_donor(annotations={**OPTED, **last_action("scale-replicas", "down", ago=timedelta(minutes=1),
                                                                key=("fp-other", "2025-03-01T10:00:00+00:00")),
                                     "gpu-reactor.io/cooldown-until": (NOW + timedelta(minutes=29)).strftime(
                                         "%Y-%m-%dT%H:%M:%SZ")}))
    assert not v.qualifies and "cooldown" in v.reason


def test_higher_priority_donors_when_the_policy_allows_them() -> None:
    policy = replace(POLICY, rebalance_higher_priority_donors=True)
    assert _verdict(_donor(priority="high-priority-gpu"), priority="medium-priority-gpu", policy=policy).qualifies


def test_a_class_off_the_ladder_ranks_below_it() -> None:
    assert _verdict(_donor(priority="batch"), priority="medium-priority-gpu").qualifies
    assert not _verdict(_donor(priority="medium-priority-gpu"), priority="batch").qualifies


def test_labels_opt_in_only_when_the_policy_names_some() -> None:
    policy = replace(POLICY, rebalance_donor_labels=MappingProxyType({"team": "research", "tier": "batch"}))
    assert _verdict(_donor(annotations={}, labels={"team": "research", "tier": "batch"}), policy=policy).qualifies
    partial = _verdict(_donor(annotations={}, labels={"team": "research"}), policy=policy)
    assert partial.reason == ('not opted in (annotation gpu-reactor.io/donor: "true" or labels team=research, '
                              "tier=batch)")
    assert not _verdict(_donor(annotations={}, labels={"team": "research"})).qualifies


def test_a_quota_that_does_not_count_the_donor_is_not_helped() -> None:
    """The refusing quota is scoped to high-priority-gpu: a medium donor's GPUs are not in it."""
    scoped = bounds(quotas=(Quota("high-gpu", 4, 4, (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)),))
    short = Shortfall("high-gpu", 2, 0)
    v = qualify(_donor(), receiver=_receiver(), shortfall=short, bounds=scoped, policy=POLICY, now=NOW)
    assert v.reason == "quota high-gpu does not count its pods"


def test_ranking_lowest_priority_then_most_idle_then_largest_then_name() -> None:
    low = _verdict(_donor("z-low", priority="batch", value=0.3))
    idle = _verdict(_donor("b-idle", value=0.01))
    big = _verdict(_donor("c-big", value=0.1, replicas=3))
    small = _verdict(_donor("d-small", value=0.1))
    same = _verdict(_donor("a-small", value=0.1))
    refused = _verdict(_donor("e-refused", annotations={}))
    order = [v.ref.name for v in ranked([small, refused, same, big, idle, low])]
    assert order == ["z-low", "b-idle", "c-big", "a-small", "d-small"]


def test_no_donor_names_every_candidate() -> None:
    assert no_donor([]) == "no donor: the alert source shows no workload idle in the namespace"
    line = no_donor([_verdict(_donor(annotations={})), _verdict(_donor("x", mode=Mode.OFF))])
    assert line == ('no donor: Deployment/training: not opted in (annotation gpu-reactor.io/donor: "true"); '
                    "Deployment/x: mode off: a donor must be in enforce")


def test_what_a_class_change_frees() -> None:
    """set-priority-down from a class a scoped quota counts to one it does not: every replica's GPUs."""
    high = (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)
    b = bounds(quotas=(Quota("high-gpu", 8, 8, high),))
    w = workload(priority="high-priority-gpu", replicas=2, gpus=4)
    action = Action("set-priority", "down", w.ref, None, "high-priority-gpu", "medium-priority-gpu",
                    "set-priority-down")
    assert freed(action, w, signal(), b, POLICY, NOW, "high-gpu") == 8
    assert freed(action, w, signal(), bounds(hard=8, used=8), POLICY, NOW, "gpu-quota") == 0


def _gave(receiver_uid: str = "uid-inference") -> dict[str, str]:
    record = Rebalance("donor", "Deployment", "inference", receiver_uid, 4, "gpu-quota", NOW - timedelta(minutes=1))
    return {**last_action("scale-replicas", "down", ago=timedelta(minutes=1), from_value=2, to_value=1),
            REBALANCE: rebalance_annotation(record)}


def test_the_rebalance_record_round_trips() -> None:
    state = read_state(_gave())
    assert state.rebalance == Rebalance("donor", "Deployment", "inference", "uid-inference", 4, "gpu-quota",
                                        NOW - timedelta(minutes=1))
    bad = read_state({REBALANCE: json.dumps({"role": "thief", "gpus": 1})})
    assert bad.rebalance is None and bad.invalid == (REBALANCE,)


def test_the_donor_gets_back_what_it_gave_whatever_the_revert_policy() -> None:
    """The default policy reverts only set-priority-up, after revertAfter: the give-back is the rebalance's own."""
    w = workload(replicas=1, gpus=4, annotations=_gave())
    back = decide_given_back(signal(status="resolved"), w, bounds(hard=16, used=8), POLICY, NOW, "uid-inference")
    assert isinstance(back, Action) and (back.action, back.from_value, back.to_value) == ("revert", 1, 2)


def test_the_give_back_needs_the_room_and_the_right_receiver() -> None:
    w = workload(replicas=1, gpus=4, annotations=_gave())
    full = decide_given_back(signal(status="resolved"), w, bounds(hard=16, used=14), POLICY, NOW, "uid-inference")
    assert isinstance(full, Skip) and full.reason is SkipReason.QUOTA_EXCEEDED
    other = decide_given_back(signal(status="resolved"), w, bounds(hard=16), POLICY, NOW, "uid-someone-else")
    assert isinstance(other, Skip) and other.reason is SkipReason.NOTHING_TO_REVERT
    off = workload(replicas=1, gpus=4, annotations={**_gave(), "gpu-reactor.io/mode": "off"})
    refused = decide_given_back(signal(status="resolved"), off, bounds(hard=16), POLICY, NOW, "uid-inference")
    assert isinstance(refused, Skip) and refused.reason is SkipReason.MODE_OFF


def test_a_cronjob_never_gives_its_change_frees_nothing_before_its_running_job_ends() -> None:
    """A CronJob's template change reaches its next run only (the running Job keeps its pods and their GPUs):
    a CronJob donor would free nothing the receiver could use now, so it is refused by name."""
    w = _named(workload(kind="CronJob", gpus=4, annotations=OPTED), "nightly-training")
    sig = signal("GPUIdle", value=0.1)
    candidate = Candidate(w, sig, {}, Mode.ENFORCE, decide(sig, w, BOUNDS, POLICY, NOW))
    verdict = _verdict(candidate)
    assert not verdict.qualifies and "next run" in verdict.reason


def _received(paid: tuple[str, str] | None, last_key: tuple[str, str]) -> Workload:
    """A receiver grown 2 → 3 replicas; its `receiver` record names the firing the donor paid for (`paid`)."""
    record = Rebalance("receiver", "Deployment", "training", "uid-training", 4, "gpu-quota",
                       NOW - timedelta(minutes=40), paid=paid)
    return workload(replicas=3, gpus=2, annotations={
        **last_action("scale-replicas", "up", ago=timedelta(minutes=40), key=last_key, from_value=2, to_value=3),
        REBALANCE: rebalance_annotation(record)})


PAID = ("fp-paid", "2026-11-30T03:00:00+00:00")
LATER = ("fp-later", "2026-11-30T03:30:00+00:00")


def test_the_receiver_record_names_the_paid_firing_and_round_trips() -> None:
    state = read_state(_received(PAID, PAID).annotations)
    assert state.rebalance is not None and state.rebalance.paid == PAID
    bad = read_state({REBALANCE: json.dumps({"role": "receiver", "gpus": 1, "paid": ["fp"]})})
    assert bad.rebalance is None and bad.invalid == (REBALANCE,)


def test_only_the_paid_growth_is_undone_whatever_the_revert_policy() -> None:
    """The shipped policy reverts set-priority-up only. The paid growth's resolve undoes it all the same (its donor
    is owed); a later growth of the receiver's own, still carrying the record, is reverted only as the policy says —
    forced, its write would drop the record and leave the paid growth in place with the donor owed."""
    paid = decide(signal(status="resolved", keys=(PAID,)), _received(PAID, PAID), bounds(hard=16), POLICY, NOW)
    assert isinstance(paid, Action) and (paid.action, paid.from_value, paid.to_value) == ("revert", 3, 2)
    later = decide(signal(status="resolved", keys=(LATER,)), _received(PAID, LATER), bounds(hard=16), POLICY, NOW)
    assert isinstance(later, Skip) and later.reason is SkipReason.RESOLVED and "not reverted by policy" in later.detail
    legacy = decide(signal(status="resolved", keys=(LATER,)), _received(None, LATER), bounds(hard=16), POLICY, NOW)
    assert isinstance(legacy, Action), "a record from before `paid` existed is read as it was then"


def test_a_receiver_holding_a_paid_growth_changes_in_nothing_else_until_it_is_undone() -> None:
    """Another alert on the receiver (here an idle one, which would shrink it) is refused `rebalance-held`: written,
    it would become the last change, and the paid growth's resolve would then find nothing of its own to undo."""
    other = signal("GPUIdle", value=0.0, keys=(LATER,))
    held = decide(other, _received(PAID, PAID), bounds(hard=16), POLICY, NOW)
    assert isinstance(held, Skip) and held.reason is SkipReason.REBALANCE_HELD
    assert "given by Deployment/training" in held.detail and PAID[0] in held.detail
    again = decide(signal("GPUSaturated", value=0.99, keys=(PAID,)), _received(PAID, PAID), bounds(hard=16), POLICY, NOW)
    assert isinstance(again, Skip) and again.reason is SkipReason.ALREADY_APPLIED, "its own firing: applied already"
    legacy = decide(other, _received(None, PAID), bounds(hard=16), POLICY, NOW)
    assert not (isinstance(legacy, Skip) and legacy.reason is SkipReason.REBALANCE_HELD)


def test_once_the_paid_growth_is_no_longer_the_last_change_nothing_is_held() -> None:
    """The verifier reverted the paid growth (its rollout stalled): the last change is that revert, and the receiver
    is free again (the revert's write also drops the record: tests/state/test_rebalance_state.py)."""
    record = Rebalance("receiver", "Deployment", "training", "uid-training", 4, "gpu-quota",
                       NOW - timedelta(minutes=40), paid=PAID)
    reverted = workload(replicas=2, gpus=2, annotations={
        **last_action("revert", "down", ago=timedelta(minutes=30), key=PAID, from_value=3, to_value=2),
        REBALANCE: rebalance_annotation(record)})
    decision = decide(signal("GPUIdle", value=0.0, keys=(LATER,)), reverted, bounds(hard=16), POLICY, NOW)
    assert not (isinstance(decision, Skip) and decision.reason is SkipReason.REBALANCE_HELD), decision
