"""decide(): every refusal, with its reason, its detail where the numbers matter, and the rail order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from reactor.core.model import Action, Considered, Container, Shortfall, Skip
from reactor.core.model import SkipReason as R
from reactor.policy import decide
from reactor.state.annotations import COOLDOWN_UNTIL, MODE
from tests.policy.policy_builders import KEY, NOW, POLICY, bounds, cooldown, last_action, original, signal, workload

SAT, MEM, IDLE, MISSING = "GPUSaturated", "GPUMemorySaturated", "GPUIdle", "GPUMetricsMissing"
CLASSES = frozenset({"medium-priority-gpu", "high-priority-gpu"})
OTHER = ("fp-other", "2025-02-01T00:00:00+00:00")


def only(alert: str, *strategies: str, **changes):
    return replace(POLICY, alerts={alert: strategies}, **changes)


BOOSTED = {**last_action("set-priority", "up", ago=timedelta(minutes=15), from_value="medium-priority-gpu",
                         to_value="high-priority-gpu"), **original(priorityClassName="medium-priority-gpu")}

# id, signal, workload, bounds, policy, expected reason
CASES = [
    ("unknown-alert", signal("NodeDown"), workload(), bounds(), POLICY, R.UNKNOWN_ALERT),
    ("known-alert-without-strategies", signal(SAT), workload(), bounds(), replace(POLICY, alerts={}), R.UNKNOWN_ALERT),
    ("invalid-mode-annotation", signal(), workload(annotations={"gpu-reactor.io/mode": "sometimes"}), bounds(), POLICY,
     R.INVALID_ANNOTATION),
    ("invalid-annotation-beats-mode-off", signal(),
     workload(annotations={"gpu-reactor.io/mode": "off", "gpu-reactor.io/max-gpus": "lots"}), bounds(), POLICY,
     R.INVALID_ANNOTATION),
    ("mode-off-annotation", signal(), workload(annotations={"gpu-reactor.io/mode": "off"}), bounds(), POLICY, R.MODE_OFF),
    ("mode-off-default", signal(), workload(), bounds(), replace(POLICY, default_mode="off"), R.MODE_OFF),
    ("mode-off-blocks-revert", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations={**BOOSTED, "gpu-reactor.io/mode": "off"}), bounds(), POLICY,
     R.MODE_OFF),
    ("metrics-missing-holds", signal(MISSING), workload(), bounds(), POLICY, R.METRICS_MISSING),
    ("metrics-missing-holds-whatever-is-configured", signal(MISSING), workload(), bounds(),
     only(MISSING, "resize-gpu-down"), R.METRICS_MISSING),
    ("metrics-missing-resolved-still-holds", signal(MISSING, status="resolved"), workload(), bounds(), POLICY,
     R.METRICS_MISSING),
    ("hold-strategy-stops-the-list", signal(), workload(), bounds(), only("GPUUnderutilized", "hold", "resize-gpu-down"),
     R.METRICS_MISSING),
    ("resolved-never-resizes", signal(status="resolved", value=0.1), workload(), bounds(), POLICY, R.RESOLVED),
    ("resolved-other-alerts-action", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations={**last_action("set-priority", "up", ago=timedelta(hours=1), key=OTHER),
                                                          **original(priorityClassName="medium-priority-gpu")}),
     bounds(), POLICY, R.RESOLVED),
    ("resolved-action-not-revertible-by-policy", signal(status="resolved"),
     workload(gpus=2, annotations={**last_action("resize-gpu", "down", ago=timedelta(hours=1), container="server"),
                                   **original(gpus={"server": 4})}), bounds(), POLICY, R.RESOLVED),
    ("nothing-to-revert-without-original", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations=last_action("set-priority", "up", ago=timedelta(hours=1),
                                                                    to_value="high-priority-gpu")),
     bounds(), POLICY, R.NOTHING_TO_REVERT),
    ("nothing-to-revert-when-already-original", signal(SAT, status="resolved"),
     workload(priority="medium-priority-gpu", annotations=BOOSTED), bounds(), POLICY, R.NOTHING_TO_REVERT),
    ("revert-hold-minimum-boost-time", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations={**last_action("set-priority", "up", ago=timedelta(minutes=9),
                                                                         from_value="medium-priority-gpu",
                                                                         to_value="high-priority-gpu"),
                                                          **original(priorityClassName="medium-priority-gpu")}),
     bounds(), POLICY, R.REVERT_HOLD),
    ("revert-waits-for-rollout", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations=BOOSTED, generation=4, observed=3), bounds(), POLICY,
     R.ROLLOUT_IN_PROGRESS),
    ("revert-scale-up-left-to-the-autoscaler", signal(SAT, status="resolved"),
     workload(replicas=3, hpa=True, annotations={**last_action("scale-replicas", "up", ago=timedelta(hours=1),
                                                                   from_value=2, to_value=3),
                                                 **original(replicas=2)}),
     bounds(), replace(POLICY, revert=("scale-replicas-up",)), R.HPA_MANAGED),
    ("revert-quota-for-surge-pods", signal(SAT, status="resolved"),
     workload(priority="high-priority-gpu", annotations=BOOSTED), bounds(hard=8, used=8), POLICY, R.QUOTA_EXCEEDED),
    ("revert-twice-is-already-applied", signal(SAT, status="resolved"),
     workload(annotations=last_action("revert", "revert", ago=timedelta(minutes=1))), bounds(), POLICY, R.ALREADY_APPLIED),
    ("already-applied-duplicate-delivery", signal(value=0.2), workload(annotations=last_action("resize-gpu", "down", ago=timedelta(minutes=40))),
     bounds(), POLICY, R.ALREADY_APPLIED),
    ("already-applied-any-key-any-spelling", signal(value=0.2, keys=(OTHER, ("fp-a", "2025-03-01T11:00:00Z"))),
     workload(annotations=last_action("resize-gpu", "down", ago=timedelta(minutes=40))), bounds(), POLICY, R.ALREADY_APPLIED),
    ("already-applied-beats-cooldown", signal(value=0.2),
     workload(annotations={**last_action("resize-gpu", "down", ago=timedelta(minutes=1)), **cooldown(until=timedelta(minutes=29))}),
     bounds(), POLICY, R.ALREADY_APPLIED),
    ("cooldown-active", signal(value=0.2), workload(annotations=cooldown(until=timedelta(seconds=1))), bounds(), POLICY, R.COOLDOWN),
    ("rollout-generation-not-observed", signal(value=0.2), workload(generation=4, observed=3), bounds(), POLICY,
     R.ROLLOUT_IN_PROGRESS),
    ("rollout-pods-not-updated", signal(value=0.2), workload(replicas=3, updated=1), bounds(), POLICY, R.ROLLOUT_IN_PROGRESS),
    ("unsupported-job", signal(value=0.2), workload(kind="Job"), bounds(), POLICY, R.UNSUPPORTED_OWNER),
    ("unsupported-pod", signal(value=0.2), workload(kind="Pod"), bounds(), POLICY, R.UNSUPPORTED_OWNER),
    ("unsupported-replicaset", signal(value=0.2), workload(kind="ReplicaSet"), bounds(), POLICY, R.UNSUPPORTED_OWNER),
    ("hysteresis-grow-soon-after-shrink", signal(MEM, keys=(OTHER,)),
     workload(gpus=2, annotations=last_action("resize-gpu", "down", ago=timedelta(hours=1))), bounds(), POLICY, R.HYSTERESIS),
    ("hysteresis-shrink-soon-after-grow", signal(value=0.1, keys=(OTHER,)),
     workload(annotations=last_action("resize-gpu", "up", ago=timedelta(minutes=119))), bounds(), POLICY, R.HYSTERESIS),
    ("no-gpu-on-named-container", signal(container="sidecar"), workload(), bounds(), only("GPUUnderutilized", "resize-gpu-down"),
     R.NO_GPU_CONTAINER),
    ("named-container-absent", signal(container="ghost"), workload(), bounds(), only("GPUUnderutilized", "resize-gpu-down"),
     R.NO_GPU_CONTAINER),
    ("unnamed-with-two-gpu-containers", signal(container=None),
     workload(containers=(Container("a", 2), Container("b", 2))), bounds(), only("GPUUnderutilized", "resize-gpu-down"),
     R.NO_GPU_CONTAINER),
    ("at-min-gpus", signal(), workload(gpus=1), bounds(), only("GPUUnderutilized", "resize-gpu-down"), R.AT_MIN_GPUS),
    ("value-says-keep-all-gpus", signal(value=0.6), workload(), bounds(), only("GPUUnderutilized", "resize-gpu-down"), R.AT_MIN_GPUS),
    ("at-min-gpus-by-limitrange", signal(), workload(gpus=2), bounds(lr_min=2), only("GPUUnderutilized", "resize-gpu-down"),
     R.AT_MIN_GPUS),
    ("at-max-gpus-policy", signal(MEM), workload(gpus=8), bounds(), POLICY, R.AT_MAX_GPUS),
    ("at-max-gpus-annotation", signal(MEM), workload(gpus=4, annotations={"gpu-reactor.io/max-gpus": "4"}), bounds(), POLICY,
     R.AT_MAX_GPUS),
    ("at-max-gpus-limitrange-tighter-than-annotation", signal(MEM),
     workload(gpus=3, annotations={"gpu-reactor.io/max-gpus": "6"}), bounds(lr_max=3), POLICY, R.AT_MAX_GPUS),
    ("quota-surge-does-not-fit", signal(MEM), workload(gpus=2), bounds(hard=10, used=6), POLICY, R.QUOTA_EXCEEDED),
    ("quota-full-blocks-shrink", signal(value=0.2), workload(), bounds(hard=8, used=8), only("GPUUnderutilized", "resize-gpu-down"),
     R.QUOTA_EXCEEDED),
    ("quota-blocks-scale-up", signal(SAT), workload(), bounds(hard=10, used=7), only(SAT, "scale-replicas-up"), R.QUOTA_EXCEEDED),
    ("quota-blocks-priority-surge", signal(SAT), workload(), bounds(hard=10, used=7), only(SAT, "set-priority-up"),
     R.QUOTA_EXCEEDED),
    ("hpa-managed", signal(SAT), workload(hpa=True), bounds(), only(SAT, "scale-replicas-up"), R.HPA_MANAGED),
    ("at-min-replicas", signal(IDLE), workload(replicas=1), bounds(), only(IDLE, "scale-replicas-down"), R.AT_MIN_REPLICAS),
    ("at-max-replicas-annotation", signal(SAT), workload(replicas=2, annotations={"gpu-reactor.io/max-replicas": "2"}), bounds(),
     only(SAT, "scale-replicas-up"), R.AT_MAX_REPLICAS),
    ("scale-not-applicable-cronjob", signal(SAT), workload(kind="CronJob"), bounds(), only(SAT, "scale-replicas-up"),
     R.NOT_APPLICABLE),
    ("scale-not-applicable-statefulset", signal(IDLE), workload(kind="StatefulSet", replicas=3), bounds(),
     only(IDLE, "scale-replicas-down"), R.NOT_APPLICABLE),
    ("priority-not-in-ladder", signal(SAT), workload(priority="system-cluster-critical"), bounds(), only(SAT, "set-priority-up"),
     R.PRIORITY_NOT_IN_LADDER),
    ("priority-none-not-in-ladder", signal(SAT), workload(priority=None), bounds(), only(SAT, "set-priority-up"),
     R.PRIORITY_NOT_IN_LADDER),
    ("priority-at-top", signal(SAT), workload(priority="high-priority-gpu"), bounds(), only(SAT, "set-priority-up"),
     R.PRIORITY_AT_END),
    ("priority-at-bottom", signal(), workload(), bounds(), only("GPUUnderutilized", "set-priority-down"),
     R.PRIORITY_AT_END),
    ("priority-class-missing", signal(SAT), workload(), bounds(),
     only(SAT, "set-priority-up", priority_ladder=("medium-priority-gpu", "burst-gpu")), R.PRIORITY_CLASS_MISSING),
]


@pytest.mark.parametrize(("sig", "wl", "bnd", "pol", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_skip(sig, wl, bnd, pol, reason):
    decision = decide(sig, wl, bnd, pol, NOW, priority_classes=CLASSES)
    assert isinstance(decision, Skip), decision
    assert decision.reason is reason, decision


def test_revert_to_a_class_that_no_longer_exists():
    wl = workload(priority="high-priority-gpu", annotations=BOOSTED)
    decision = decide(signal(SAT, status="resolved"), wl, bounds(), POLICY, NOW,
                      priority_classes=frozenset({"high-priority-gpu"}))
    assert decision == Skip(R.PRIORITY_CLASS_MISSING, "PriorityClass 'medium-priority-gpu' does not exist in the cluster")


def test_fall_through_reports_the_first_blocked_strategy_and_lists_all():
    wl = workload(kind="StatefulSet", gpus=8, priority="high-priority-gpu", surge=0)
    decision = decide(signal(SAT), wl, bounds(), POLICY, NOW, priority_classes=CLASSES)
    assert decision == Skip(
        R.AT_MAX_GPUS,
        "resize-gpu-up: 8 GPUs; highest allowed 8",
        (
            Considered("scale-replicas-up", R.NOT_APPLICABLE, "replicas are only changed on Deployments, not StatefulSet"),
            Considered("resize-gpu-up", R.AT_MAX_GPUS, "8 GPUs; highest allowed 8"),
            Considered("set-priority-up", R.PRIORITY_AT_END, "class 'high-priority-gpu' is the top"),
        ),
    )


def test_only_structural_reasons_report_the_first():
    decision = decide(signal(SAT), workload(hpa=True), bounds(), only(SAT, "scale-replicas-up"), NOW)
    assert isinstance(decision, Skip)
    assert decision.reason is R.HPA_MANAGED
    assert [c.strategy for c in decision.considered] == ["scale-replicas-up"]


def test_hysteresis_is_per_strategy_and_falls_through():
    wl = workload(gpus=2, priority="medium-priority-gpu",
                  annotations=last_action("resize-gpu", "down", ago=timedelta(hours=1), key=OTHER))
    decision = decide(signal(SAT), wl, bounds(), POLICY, NOW, priority_classes=CLASSES)
    assert isinstance(decision, Skip)
    assert decision.reason is R.HYSTERESIS
    assert [(c.strategy, c.reason) for c in decision.considered] == [
        ("scale-replicas-up", R.HYSTERESIS), ("resize-gpu-up", R.HYSTERESIS), ("set-priority-up", R.HYSTERESIS)]
    assert "up allowed from 2025-03-01T13:00:00+00:00" in decision.detail


def test_hold_lists_only_what_it_looked_at():
    decision = decide(signal(), workload(), bounds(), only("GPUUnderutilized", "hold", "resize-gpu-down"), NOW)
    assert isinstance(decision, Skip)
    assert [c.strategy for c in decision.considered] == ["hold"]


@pytest.mark.parametrize(
    ("hard", "used", "detail"),
    [
        (10, 6, "server 2→3 GPUs needs 5 GPUs of quota gpu-quota (replicas 2, surge 1), headroom 4 (hard 10, used 6)"),
        (4, 4, "server 2→3 GPUs needs 5 GPUs of quota gpu-quota (replicas 2, surge 1), headroom 0 (hard 4, used 4)"),
    ],
    ids=["surge-does-not-fit", "quota-full"],
)
def test_quota_detail_names_the_numbers(hard, used, detail):
    decision = decide(signal(MEM), workload(gpus=2), bounds(hard=hard, used=used), POLICY, NOW)
    short = Shortfall("gpu-quota", 5, hard - used)  # which quota, and what it misses (rebalancing reads it)
    assert decision == Skip(R.QUOTA_EXCEEDED, f"resize-gpu-up: {detail}",
                            (Considered("resize-gpu-up", R.QUOTA_EXCEEDED, detail, short),), short)


def test_shrink_needs_only_the_surge_pods():
    # 2 replicas at 4 GPUs shrink to 2: the replicas free GPUs, but the surge pod needs 2 while old pods count.
    fits = decide(signal(value=0.2), workload(), bounds(hard=10, used=8), only("GPUUnderutilized", "resize-gpu-down"), NOW)
    blocked = decide(signal(value=0.2), workload(), bounds(hard=10, used=9), only("GPUUnderutilized", "resize-gpu-down"), NOW)
    assert not isinstance(fits, Skip)
    assert isinstance(blocked, Skip) and blocked.reason is R.QUOTA_EXCEEDED
    no_surge = decide(signal(value=0.2), workload(surge=0), bounds(hard=8, used=8), only("GPUUnderutilized", "resize-gpu-down"), NOW)
    assert not isinstance(no_surge, Skip)


@pytest.mark.parametrize(
    ("annotations", "wl_changes", "reason"),
    [
        ({"gpu-reactor.io/mode": "off", **cooldown(until=timedelta(hours=1))}, {}, R.MODE_OFF),
        ({**cooldown(until=timedelta(hours=1))}, {"generation": 5, "observed": 4}, R.COOLDOWN),
        ({}, {"kind": "Job", "generation": 5, "observed": 4}, R.ROLLOUT_IN_PROGRESS),
        ({"gpu-reactor.io/mode": "banana", **last_action("resize-gpu", "down", ago=timedelta(minutes=1))}, {}, R.INVALID_ANNOTATION),
    ],
    ids=["mode-off-before-cooldown", "cooldown-before-rollout", "rollout-before-owner-kind", "invalid-before-already-applied"],
)
def test_rail_order(annotations, wl_changes, reason):
    decision = decide(signal(value=0.2), workload(annotations=annotations, **wl_changes), bounds(), POLICY, NOW)
    assert isinstance(decision, Skip)
    assert decision.reason is reason


def test_unknown_alert_comes_first():
    wl = workload(kind="Pod", annotations={"gpu-reactor.io/mode": "bad"})
    assert decide(signal("Whatever"), wl, bounds(), POLICY, NOW).reason is R.UNKNOWN_ALERT


def test_already_applied_detail_names_the_firing():
    wl = workload(annotations=last_action("resize-gpu", "down", ago=timedelta(minutes=40)))
    decision = decide(signal(value=0.2), wl, bounds(), POLICY, NOW)
    assert decision == Skip(R.ALREADY_APPLIED,
                            f"firing fp-a at {KEY[1]} was handled at 2025-03-01T11:20:00+00:00")


@pytest.mark.parametrize("annotations, reason", [
    ({COOLDOWN_UNTIL: (NOW + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}, R.COOLDOWN),
    ({MODE: "off"}, R.MODE_OFF),
    ({}, None),
], ids=["cooldown", "mode-off", "acts"])
def test_refusals_read_no_namespace_fact_and_actions_read_what_they_need(annotations: dict[str, str],
                                                                         reason: R | None) -> None:
    """The namespace facts are readers: a rail that refuses must not call them (no API read for the
    common refusals), and a strategy that sizes a change must call each one it needs exactly once."""
    asked: list[str] = []

    def reader(name: str, value: Any) -> Callable[[], Any]:
        return lambda: asked.append(name) or value

    wl = workload(annotations=annotations)
    decision = decide(signal(value=0.2), wl, reader("bounds", bounds(hard=100)), POLICY, NOW,
                      priority_classes=reader("classes", frozenset()), hpa_managed=reader("hpa", False))
    if reason is None:
        assert isinstance(decision, Action) and asked == ["bounds"]
    else:
        assert isinstance(decision, Skip) and decision.reason is reason and asked == []
