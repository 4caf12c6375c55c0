"""The policy's side of verification (pure): the recently-reverted rail, the revert of a stalled change, and the
`verification` annotation's codec (tenants can write anything into it; without a valid seal it is dropped)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from types import MappingProxyType

import pytest

from reactor.core.model import Action, Skip, SkipReason
from reactor.policy import decide
from reactor.policy.context import Context
from reactor.policy.revert import revert_stalled
from reactor.state.annotations import VERIFICATION, read_state
from tests.policy.policy_builders import NOW, POLICY, bounds, last_action, original, signal, workload

GROW_ONLY = replace(POLICY, alerts=MappingProxyType({**POLICY.alerts, "GPUSaturated": ("resize-gpu-up",)}))


def _verification(result: str, strategy: str, *, ago: timedelta, reason: str = "") -> dict[str, str]:
    since = (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {VERIFICATION: json.dumps({"result": result, "strategy": strategy, "since": since, "reason": reason})}


@pytest.mark.parametrize(("result", "strategy", "ago", "reason"), [
    ("reverted", "resize-gpu-up", timedelta(hours=1), SkipReason.RECENTLY_REVERTED),
    ("reverted", "resize-gpu-up", timedelta(hours=7), None),  # the window (6h) has passed
    ("reverted", "resize-gpu-down", timedelta(hours=1), None),  # another strategy was reverted
    ("verified", "resize-gpu-up", timedelta(hours=1), None),
    ("pending", "resize-gpu-up", timedelta(hours=1), None),
], ids=["within-window", "after-window", "other-strategy", "verified", "pending"])
def test_the_recently_reverted_rail(result: str, strategy: str, ago: timedelta, reason: SkipReason | None) -> None:
    w = workload(gpus=2, replicas=1, annotations=_verification(result, strategy, ago=ago, reason="stalled"))
    decision = decide(signal("GPUSaturated", value=0.98), w, bounds(), GROW_ONLY, NOW)
    if reason is None:
        assert isinstance(decision, Action) and decision.strategy == "resize-gpu-up"
    else:
        assert isinstance(decision, Skip) and decision.reason is reason
        assert "resize-gpu-up was reverted at" in decision.detail


def test_a_stalled_change_is_reverted_to_the_original_even_while_it_rolls_out() -> None:
    annotations = {**last_action("resize-gpu", "up", ago=timedelta(minutes=11), container="server",
                                 from_value=2, to_value=3),
                   **original(gpus={"server": 2}), **_verification("pending", "resize-gpu-up",
                                                                    ago=timedelta(minutes=11))}
    w = workload(gpus=3, replicas=1, generation=4, observed=4, updated=0, annotations=annotations)
    assert w.rolling_out
    # The quota is full: the template check would refuse, but the original template's pods ran before.
    ctx = Context(signal("RolloutStalled", status="resolved"), w, bounds(hard=3, used=3), POLICY, NOW)
    decision = revert_stalled(ctx)
    assert isinstance(decision, Action)
    assert (decision.action, decision.from_value, decision.to_value) == ("revert", 3, 2)


def test_nothing_pending_is_nothing_to_revert() -> None:
    annotations = {**last_action("resize-gpu", "up", ago=timedelta(minutes=11), container="server",
                                 from_value=2, to_value=3),
                   **original(gpus={"server": 2}), **_verification("verified", "resize-gpu-up", ago=timedelta(0))}
    ctx = Context(signal("RolloutStalled", status="resolved"), workload(gpus=3, annotations=annotations), bounds(),
                  POLICY, NOW)
    decision = revert_stalled(ctx)
    assert isinstance(decision, Skip) and decision.reason is SkipReason.NOTHING_TO_REVERT


def test_a_revert_to_an_original_outside_the_bounds_is_refused() -> None:
    """A forged or stale original (here 99 GPUs) is what a revert would aim at: the bounds still apply."""
    annotations = {**last_action("resize-gpu", "down", ago=timedelta(minutes=11), container="server",
                                 from_value=99, to_value=3),
                   **original(gpus={"server": 99}), **_verification("pending", "resize-gpu-down",
                                                                     ago=timedelta(minutes=11))}
    ctx = Context(signal("RolloutStalled", status="resolved"), workload(gpus=3, annotations=annotations), bounds(),
                  POLICY, NOW)
    decision = revert_stalled(ctx)
    assert isinstance(decision, Skip) and decision.reason is SkipReason.AT_MAX_GPUS


@pytest.mark.parametrize("raw", [
    "not json", "[]", '{"result": "done", "strategy": "resize-gpu-up", "since": "2025-03-01T12:00:00Z"}',
    '{"result": "reverted", "strategy": "delete-everything", "since": "2025-03-01T12:00:00Z"}',
    '{"result": "reverted", "strategy": "resize-gpu-up", "since": "9999-01-01T00:00:00Z"}',
], ids=["not-json", "not-an-object", "unknown-result", "unknown-strategy", "year-9999"])
def test_an_unreadable_verification_is_invalid_never_guessed(raw: str) -> None:
    state = read_state({VERIFICATION: raw})
    assert state.verification is None and state.invalid == (VERIFICATION,)
