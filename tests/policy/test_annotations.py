"""The annotation codec: what people set, what the reactor writes, and values it must not guess at."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType

import pytest

from reactor.core.model import Action, LastAction, ReactorState, Skip, SkipReason, WorkloadRef
from reactor.policy import decide
from reactor.state.annotations import (
    COOLDOWN_UNTIL,
    LAST_ACTION,
    MAX_GPUS,
    MAX_REPLICAS,
    MIN_GPUS,
    MIN_REPLICAS,
    MODE,
    ORIGINAL,
    VERIFICATION,
    read_state,
    state_annotations,
)
from tests.policy.policy_builders import KEY, NOW, POLICY, bounds, original, signal, workload

REF = WorkloadRef("Deployment", "ml", "trainer")


def test_keys_carry_the_prefix():
    assert (MODE, MIN_GPUS, MAX_GPUS, MIN_REPLICAS, MAX_REPLICAS, LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL) == (
        "gpu-reactor.io/mode", "gpu-reactor.io/min-gpus", "gpu-reactor.io/max-gpus", "gpu-reactor.io/min-replicas",
        "gpu-reactor.io/max-replicas", "gpu-reactor.io/last-action", "gpu-reactor.io/cooldown-until",
        "gpu-reactor.io/original")


def test_read_everything_valid():
    doc = {"action": "resize-gpu", "direction": "down", "container": "server", "from": 4, "to": 2,
           "alert": "GPUUnderutilized", "fingerprint": "fp-a", "startsAt": "2025-03-01T11:00:00Z", "time": "2025-03-01T11:30:00Z"}
    state = read_state({
        MODE: "recommend", MIN_GPUS: "1", MAX_GPUS: "4", MIN_REPLICAS: "0", MAX_REPLICAS: "6",
        LAST_ACTION: json.dumps(doc), COOLDOWN_UNTIL: "2025-03-01T12:00:00Z",
        ORIGINAL: '{"gpus": {"server": 4}, "replicas": 3, "priorityClassName": "medium-priority-gpu"}',
        "gpu-reactor.io/unknown": "x", "app.kubernetes.io/name": "trainer",
    })
    utc = UTC
    assert state == ReactorState(
        mode="recommend", min_gpus=1, max_gpus=4, min_replicas=0, max_replicas=6,
        last_action=LastAction("resize-gpu", "down", "server", 4, 2, "fp-a", "2025-03-01T11:00:00Z",
                               datetime(2025, 3, 1, 11, 30, tzinfo=utc), "GPUUnderutilized"),
        cooldown_until=datetime(2025, 3, 1, 12, 0, tzinfo=utc),
        original={"gpus": {"server": 4}, "replicas": 3, "priorityClassName": "medium-priority-gpu"},
    )


def test_read_nothing():
    assert read_state({}) == ReactorState()


GOOD_LAST = {"action": "set-priority", "direction": "up", "fingerprint": "f", "startsAt": "s", "time": "2025-03-01T11:00:00Z"}


@pytest.mark.parametrize(
    ("annotations", "invalid"),
    [
        ({MODE: "Enforce"}, (MODE,)),
        ({MODE: ""}, (MODE,)),
        ({MIN_GPUS: "-1"}, (MIN_GPUS,)),
        ({MAX_GPUS: "two"}, (MAX_GPUS,)),
        ({MAX_GPUS: "1.5"}, (MAX_GPUS,)),
        ({MIN_REPLICAS: " 2"}, (MIN_REPLICAS,)),
        ({MAX_REPLICAS: ""}, (MAX_REPLICAS,)),
        ({MIN_GPUS: "4", MAX_GPUS: "2"}, (MAX_GPUS, MIN_GPUS)),
        ({MIN_REPLICAS: "5", MAX_REPLICAS: "1", MODE: "off"}, (MAX_REPLICAS, MIN_REPLICAS)),
        ({LAST_ACTION: "not json"}, (LAST_ACTION,)),
        ({LAST_ACTION: "[]"}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "fingerprint": ""})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({k: v for k, v in GOOD_LAST.items() if k != "startsAt"})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "direction": "sideways"})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "time": "2025-03-01T11:00:00"})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "from": [1]})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "to": True})}, (LAST_ACTION,)),
        ({LAST_ACTION: json.dumps({**GOOD_LAST, "container": 3})}, (LAST_ACTION,)),
        ({COOLDOWN_UNTIL: "tomorrow"}, (COOLDOWN_UNTIL,)),
        ({COOLDOWN_UNTIL: "2025-03-01T12:00:00"}, (COOLDOWN_UNTIL,)),
        ({ORIGINAL: "[1]"}, (ORIGINAL,)),
        ({ORIGINAL: '{"gpus": {"server": "4"}}'}, (ORIGINAL,)),
        ({ORIGINAL: '{"replicas": -1}'}, (ORIGINAL,)),
        ({ORIGINAL: '{"cpu": 1}'}, (ORIGINAL,)),
        ({ORIGINAL: '{"priorityClassName": 7}'}, (ORIGINAL,)),
    ],
    ids=lambda v: None if isinstance(v, tuple) else json.dumps(v)[:60],
)
def test_unparseable_values_are_reported_not_guessed(annotations, invalid):
    state = read_state(annotations)
    assert state.invalid == invalid
    for key in invalid:
        name = key.removeprefix("gpu-reactor.io/").replace("-", "_")
        if name != "original":
            assert getattr(state, name) is None


def test_an_invalid_key_leaves_the_others_readable():
    state = read_state({MODE: "recommend", MAX_GPUS: "x"})
    assert (state.mode, state.max_gpus, state.invalid) == ("recommend", None, (MAX_GPUS,))


def test_original_is_read_only():
    state = read_state({ORIGINAL: '{"gpus": {"server": 4}}'})
    assert isinstance(state.original, MappingProxyType)
    with pytest.raises(TypeError):
        state.original["gpus"]["server"] = 1  # type: ignore[index]


def _resize(from_value=4, to_value=2, *, direction="down") -> Action:
    return Action("resize-gpu", direction, REF, "server", from_value, to_value, f"resize-gpu-{direction}", gpu_delta=-4)


def test_first_change_writes_all_three_and_a_pending_verification():
    written = state_annotations(_resize(), signal(value=0.2), workload(), POLICY.cooldown, NOW)
    assert set(written) == {LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL, VERIFICATION}
    assert json.loads(written[VERIFICATION]) == {"result": "pending", "strategy": "resize-gpu-down",
                                                 "since": "2025-03-01T12:00:00Z", "reason": ""}
    assert json.loads(written[LAST_ACTION]) == {
        "action": "resize-gpu", "direction": "down", "container": "server", "from": 4, "to": 2,
        "alert": "GPUUnderutilized", "fingerprint": "fp-a", "startsAt": KEY[1], "time": "2025-03-01T12:00:00Z"}
    assert written[COOLDOWN_UNTIL] == "2025-03-01T12:30:00Z"
    assert json.loads(written[ORIGINAL]) == {"gpus": {"server": 4}}


def test_later_changes_keep_the_first_original_and_add_new_dimensions():
    wl = workload(gpus=2, annotations=original(gpus={"server": 4}))
    action = Action("set-priority", "up", REF, None, "medium-priority-gpu", "high-priority-gpu", "set-priority-up")
    written = state_annotations(action, signal("GPUSaturated"), wl, POLICY.cooldown, NOW)
    assert json.loads(written[ORIGINAL]) == {"gpus": {"server": 4}, "priorityClassName": "medium-priority-gpu"}
    again = state_annotations(_resize(2, 1), signal(), wl, POLICY.cooldown, NOW)
    assert json.loads(again[ORIGINAL]) == {"gpus": {"server": 4}}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"priorityClassName": "medium-priority-gpu"}, None),
        ({"priorityClassName": "medium-priority-gpu", "gpus": {"server": 4}}, '{"gpus":{"server":4}}'),
    ],
    ids=["only-dimension-deletes-key", "other-dimension-stays"],
)
def test_revert_drops_its_dimension_from_original(before, after):
    wl = workload(priority="high-priority-gpu", annotations=original(**before))
    action = Action("revert", "revert", REF, None, "high-priority-gpu", "medium-priority-gpu", "set-priority-up")
    written = state_annotations(action, signal("GPUSaturated", status="resolved"), wl, POLICY.cooldown, NOW)
    assert ORIGINAL in written and written[ORIGINAL] == after
    assert json.loads(written[LAST_ACTION])["direction"] == "revert"


def test_cooldown_is_rounded_up_never_shortened():
    written = state_annotations(_resize(), signal(), workload(), POLICY.cooldown, NOW + timedelta(microseconds=1))
    assert written[COOLDOWN_UNTIL] == "2025-03-01T12:30:01Z"
    assert json.loads(written[LAST_ACTION])["time"] == "2025-03-01T12:00:00Z"


def test_time_is_written_in_utc_with_z():
    later = datetime(2025, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    written = state_annotations(_resize(), signal(), workload(), POLICY.cooldown, later)
    assert written[COOLDOWN_UNTIL] == "2025-03-01T12:30:00Z"


def test_round_trip_makes_the_same_firing_already_applied_and_starts_the_cooldown():
    sig, wl = signal(value=0.2), workload()
    action = decide(sig, wl, bounds(), POLICY, NOW)
    assert isinstance(action, Action)
    written = state_annotations(action, sig, wl, POLICY.cooldown, NOW)
    after = workload(gpus=2, annotations={k: v for k, v in written.items() if v is not None})
    assert after.state.invalid == ()
    assert after.state.last_action == LastAction("resize-gpu", "down", "server", 4, 2, "fp-a", KEY[1], NOW, "GPUUnderutilized")
    assert after.state.cooldown_until == NOW + POLICY.cooldown
    assert decide(sig, after, bounds(), POLICY, NOW + timedelta(hours=5)).reason is SkipReason.ALREADY_APPLIED
    new_firing = signal(value=0.2, keys=(("fp-a", "2025-03-01T12:10:00+00:00"),))
    assert decide(new_firing, after, bounds(), POLICY, NOW + timedelta(minutes=29)).reason is SkipReason.COOLDOWN


def test_round_trip_of_boost_then_revert():
    sat = signal("GPUSaturated")
    only_priority = replace(POLICY, alerts={"GPUSaturated": ("set-priority-up",)})
    wl = workload()
    boost = decide(sat, wl, bounds(), only_priority, NOW)
    assert isinstance(boost, Action)
    boosted = workload(priority="high-priority-gpu", annotations={k: v for k, v in state_annotations(boost, sat, wl, POLICY.cooldown, NOW).items() if v})
    resolved = signal("GPUSaturated", status="resolved")
    later = NOW + timedelta(minutes=10)
    revert = decide(resolved, boosted, bounds(), only_priority, later)
    assert isinstance(revert, Action)
    assert (revert.action, revert.from_value, revert.to_value) == ("revert", "high-priority-gpu", "medium-priority-gpu")
    written = state_annotations(revert, resolved, boosted, POLICY.cooldown, later)
    assert written[ORIGINAL] is None
    done = workload(annotations={k: v for k, v in written.items() if v is not None})
    assert decide(resolved, done, bounds(), only_priority, later) == Skip(
        SkipReason.ALREADY_APPLIED, "already reverted at 2025-03-01T12:10:00+00:00")
