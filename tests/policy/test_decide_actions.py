"""decide(): every action the policy can take, with exact desired states and GPU deltas."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from reactor.core.model import Action, Considered, Container, SkipReason, WorkloadRef
from reactor.policy import decide
from tests.policy.policy_builders import NOW, POLICY, bounds, cooldown, last_action, original, signal, workload

SAT = "GPUSaturated"
MEM = "GPUMemorySaturated"
IDLE = "GPUIdle"
STARTS_OLD = "2025-02-28T00:00:00+00:00"
ONLY = {
    "priority-up": replace(POLICY, alerts={SAT: ("set-priority-up",)}),
    "resize-down": replace(POLICY, alerts={IDLE: ("resize-gpu-down",)}),
    "resize-up": replace(POLICY, alerts={SAT: ("resize-gpu-up",)}),
    "recommend-dry": replace(POLICY, dry_run=True, default_mode="recommend"),
}
REVERTED = {**last_action("set-priority", "up", ago=timedelta(minutes=15), from_value="medium-priority-gpu",
                          to_value="high-priority-gpu"), **original(priorityClassName="medium-priority-gpu")}

# id, signal, workload, bounds, policy, expected (action, direction, container, from, to, gpu_delta)
CASES = [
    ("resize-down-sized-by-value", signal(value=0.20), workload(), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("resize-down-float-noise-0.4-of-3-is-2", signal(value=0.40), workload(gpus=3), bounds(), POLICY,
     ("resize-gpu", "down", "server", 3, 2, -2)),
    ("resize-down-one-step-without-value", signal(), workload(), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 3, -2)),
    ("resize-down-zero-value-stops-at-policy-min", signal(value=0.0), workload(), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 1, -6)),
    ("resize-down-stops-at-annotation-min", signal(value=0.0), workload(annotations={"gpu-reactor.io/min-gpus": "3"}),
     bounds(), POLICY, ("resize-gpu", "down", "server", 4, 3, -2)),
    ("resize-down-stops-at-limitrange-min", signal(value=0.0), workload(), bounds(lr_min=2), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("resize-down-annotation-min-clamped-into-limitrange", signal(value=0.1),
     workload(annotations={"gpu-reactor.io/min-gpus": "6"}), bounds(lr_max=3), POLICY,
     ("resize-gpu", "down", "server", 4, 3, -2)),
    ("resize-down-idle-fallback-on-one-replica", signal(IDLE), workload(replicas=1), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 3, -1)),
    ("resize-down-cronjob-counts-one-run", signal(value=0.2), workload(kind="CronJob"), bounds(hard=2, used=2), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -2)),
    ("resize-down-only-gpu-container-when-unnamed", signal(container=None, value=0.2), workload(), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("resize-up-memory-saturated", signal(MEM), workload(gpus=2), bounds(), POLICY,
     ("resize-gpu", "up", "server", 2, 3, 2)),
    ("resize-up-statefulset", signal(MEM), workload(kind="StatefulSet", gpus=2, replicas=3, surge=0), bounds(), POLICY,
     ("resize-gpu", "up", "server", 2, 3, 3)),
    ("resize-up-within-limitrange-tighter-than-annotation", signal(MEM),
     workload(gpus=2, annotations={"gpu-reactor.io/max-gpus": "8"}), bounds(lr_max=3), POLICY,
     ("resize-gpu", "up", "server", 2, 3, 2)),
    ("scale-up", signal(SAT), workload(replicas=2), bounds(), POLICY,
     ("scale-replicas", "up", None, 2, 3, 4)),
    ("scale-up-to-annotation-max", signal(SAT), workload(replicas=2, annotations={"gpu-reactor.io/max-replicas": "3"}),
     bounds(), POLICY, ("scale-replicas", "up", None, 2, 3, 4)),
    ("scale-down", signal(IDLE), workload(replicas=3), bounds(), POLICY,
     ("scale-replicas", "down", None, 3, 2, -4)),
    ("scale-down-to-zero-when-annotation-allows", signal(IDLE),
     workload(replicas=1, annotations={"gpu-reactor.io/min-replicas": "0"}), bounds(), POLICY,
     ("scale-replicas", "down", None, 1, 0, -4)),
    ("priority-up", signal(SAT), workload(), bounds(), ONLY["priority-up"],
     ("set-priority", "up", None, "medium-priority-gpu", "high-priority-gpu", 0)),
    ("priority-down-after-resize-at-min", signal(), workload(gpus=1, priority="high-priority-gpu"), bounds(), POLICY,
     ("set-priority", "down", None, "high-priority-gpu", "medium-priority-gpu", 0)),
    ("revert-priority-after-hold", signal(SAT, status="resolved"), workload(priority="high-priority-gpu", annotations=REVERTED),
     bounds(), POLICY, ("revert", "revert", None, "high-priority-gpu", "medium-priority-gpu", 0)),
    ("revert-bypasses-cooldown", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations={**REVERTED, **cooldown(until=timedelta(minutes=15))}),
     bounds(), POLICY, ("revert", "revert", None, "high-priority-gpu", "medium-priority-gpu", 0)),
    ("revert-gpu-up-when-policy-reverts-it", signal(MEM, status="resolved"),
     workload(gpus=3, annotations={**last_action("resize-gpu", "up", ago=timedelta(hours=1), container="server",
                                                     from_value=2, to_value=3),
                                   **original(gpus={"server": 2})}),
     bounds(), replace(POLICY, revert=("resize-gpu-up",)), ("revert", "revert", "server", 3, 2, -2)),
    ("revert-scale-up-when-policy-reverts-it", signal(SAT, status="resolved"),
     workload(replicas=3, annotations={**last_action("scale-replicas", "up", ago=timedelta(hours=1), from_value=2,
                                                     to_value=3),
                                       **original(replicas=2)}),
     bounds(), replace(POLICY, revert=("scale-replicas-up",)), ("revert", "revert", None, 3, 2, -4)),
    ("recommend-mode-and-dry-run-still-decide", signal(value=0.2), workload(), bounds(), ONLY["recommend-dry"],
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("enforce-annotation-over-recommend-default", signal(value=0.2), workload(annotations={"gpu-reactor.io/mode": "enforce"}),
     bounds(), ONLY["recommend-dry"], ("resize-gpu", "down", "server", 4, 2, -4)),
    ("cooldown-expired", signal(value=0.2), workload(annotations=cooldown(until=timedelta(seconds=-1))), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("cooldown-ends-exactly-now", signal(value=0.2), workload(annotations=cooldown(until=timedelta(0))), bounds(), POLICY,
     ("resize-gpu", "down", "server", 4, 2, -4)),
    ("hysteresis-expired-grow-after-shrink", signal(MEM),
     workload(gpus=2, annotations=last_action("resize-gpu", "down", ago=timedelta(hours=2), key=("fp-old", STARTS_OLD))),
     bounds(), POLICY, ("resize-gpu", "up", "server", 2, 3, 2)),
    ("same-direction-needs-no-hysteresis", signal(value=0.2),
     workload(annotations=last_action("resize-gpu", "down", ago=timedelta(minutes=31), key=("fp-old", STARTS_OLD))),
     bounds(), POLICY, ("resize-gpu", "down", "server", 4, 2, -4)),
    ("new-firing-of-same-alert-acts-again", signal(value=0.2),
     workload(annotations=last_action("resize-gpu", "down", ago=timedelta(hours=3), key=("fp-a", STARTS_OLD))),
     bounds(), POLICY, ("resize-gpu", "down", "server", 4, 2, -4)),
    ("quota-fits-exactly-with-surge", signal(MEM), workload(gpus=2), bounds(hard=10, used=5), POLICY,
     ("resize-gpu", "up", "server", 2, 3, 2)),
]


@pytest.mark.parametrize(("sig", "wl", "bnd", "pol", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_action(sig, wl, bnd, pol, expected):
    decision = decide(sig, wl, bnd, pol, NOW, priority_classes=frozenset({"medium-priority-gpu", "high-priority-gpu"}))
    assert isinstance(decision, Action), decision
    got = (decision.action, decision.direction, decision.container, decision.from_value, decision.to_value,
           decision.gpu_delta)
    assert got == expected
    assert decision.workload == WorkloadRef(wl.ref.kind, "ml", "trainer")


def test_action_records_strategy_and_what_was_considered():
    decision = decide(signal(SAT), workload(kind="StatefulSet", gpus=2, surge=0), bounds(), POLICY, NOW)
    assert isinstance(decision, Action)
    assert decision.strategy == "resize-gpu-up"
    assert decision.considered == (
        Considered("scale-replicas-up", SkipReason.NOT_APPLICABLE,
                   "replicas are only changed on Deployments, not StatefulSet"),
        Considered("resize-gpu-up", None),
    )


def test_revert_names_the_strategy_it_undoes():
    decision = decide(signal(SAT, status="resolved"), workload(priority="high-priority-gpu", annotations=REVERTED),
                      bounds(), POLICY, NOW)
    assert isinstance(decision, Action)
    assert decision.strategy == "set-priority-up"


def test_unknown_priority_classes_trust_the_ladder():
    decision = decide(signal(SAT), workload(), bounds(), ONLY["priority-up"], NOW, priority_classes=None)
    assert isinstance(decision, Action)
    assert decision.to_value == "high-priority-gpu"


def test_two_gpu_containers_resize_only_the_named_one():
    two = workload(containers=(Container("server", 4), Container("encoder", 2)))
    decision = decide(signal(container="encoder"), two, bounds(), POLICY, NOW)
    assert isinstance(decision, Action)
    assert (decision.container, decision.from_value, decision.to_value, decision.gpu_delta) == ("encoder", 2, 1, -2)


def test_decide_is_deterministic_for_equal_inputs():
    args = (signal(value=0.2), workload(), bounds(hard=20, used=3), POLICY, NOW)
    assert decide(*args) == decide(*args)
