"""decide() with scoped ResourceQuotas: a quota counts only the pods its scope matches (PriorityClass
In/NotIn/Exists/DoesNotExist, BestEffort, Terminating, ...); a change must fit every quota that will count
the pods it creates, and a priority change moves every replica into the new class's quota."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from reactor.core.model import Action, Container, PodShape, Quota, ScopeTerm, Skip, Workload
from reactor.core.model import SkipReason as R
from reactor.policy import decide
from tests.policy.policy_builders import NOW, POLICY, bounds, last_action, original, signal, workload

SAT, MEM = "GPUSaturated", "GPUMemorySaturated"
MED, HIGH = "medium-priority-gpu", "high-priority-gpu"
CLASSES = frozenset({MED, HIGH, "burst-gpu"})
UP = replace(POLICY, alerts={SAT: ("set-priority-up",)})
GROW = replace(POLICY, alerts={MEM: ("resize-gpu-up",)})
SCALE = replace(POLICY, alerts={SAT: ("scale-replicas-up",)})


def cls_in(*names: str) -> tuple[ScopeTerm, ...]:
    return (ScopeTerm("PriorityClass", "In", names),)


def three_medium(*, pods: PodShape | None = None, **changes: object) -> Workload:
    """The issue's workload: 3 replicas of 1 GPU at medium priority, default surge (1)."""
    base = {"containers": (Container("server", 1),), "replicas": 3, "priority": MED, "surge": 1}
    made = workload(**{**base, **changes})  # type: ignore[arg-type]
    return made if pods is None else replace(made, pods=pods)


# id, workload, quotas, policy, signal, default class, expected: a SkipReason or the action's target value
CASES = [
    ("a-new-class-quota-must-hold-every-replica", three_medium(), (Quota("high-gpu", 2, 0, cls_in(HIGH)),), UP, SAT,
     None, R.QUOTA_EXCEEDED),
    ("new-class-quota-holding-every-replica", three_medium(), (Quota("high-gpu", 3, 0, cls_in(HIGH)),), UP, SAT,
     None, HIGH),
    ("old-class-quota-full-is-freed-as-pods-roll", three_medium(), (Quota("medium-gpu", 3, 3, cls_in(MED)),), UP,
     SAT, None, HIGH),
    ("unscoped-quota-needs-only-the-surge", three_medium(), (Quota("all", 4, 3),), UP, SAT, None, HIGH),
    ("unscoped-full-blocks-the-surge", three_medium(), (Quota("all", 3, 3),), UP, SAT, None, R.QUOTA_EXCEEDED),
    ("b-burst-quota-ignores-a-workload-without-class", three_medium(priority=None),
     (Quota("burst-gpu", 0, 0, cls_in("burst-gpu")),), GROW, MEM, None, 2),
    ("burst-quota-counts-the-default-class", three_medium(priority=None),
     (Quota("burst-gpu", 0, 0, cls_in("burst-gpu")),), GROW, MEM, "burst-gpu", R.QUOTA_EXCEEDED),
    ("notin-counts-a-pod-without-class", three_medium(priority=None),
     (Quota("not-high", 0, 0, (ScopeTerm("PriorityClass", "NotIn", (HIGH,)),)),), GROW, MEM, None, R.QUOTA_EXCEEDED),
    ("does-not-exist-ignores-a-classed-pod", three_medium(),
     (Quota("classless", 0, 0, (ScopeTerm("PriorityClass", "DoesNotExist"),)),), GROW, MEM, None, 2),
    ("exists-counts-a-classed-pod", three_medium(),
     (Quota("classed", 4, 0, (ScopeTerm("PriorityClass", "Exists"),)),), GROW, MEM, None, R.QUOTA_EXCEEDED),
    ("gpu-only-pods-are-best-effort", three_medium(pods=PodShape(best_effort=True)),
     (Quota("be", 0, 0, (ScopeTerm("BestEffort"),)),), GROW, MEM, None, R.QUOTA_EXCEEDED),
    ("not-best-effort-quota-ignores-best-effort-pods", three_medium(pods=PodShape(best_effort=True)),
     (Quota("nbe", 0, 0, (ScopeTerm("NotBestEffort"),)),), GROW, MEM, None, 2),
    ("terminating-quota-ignores-long-running-pods", three_medium(),
     (Quota("batch", 0, 0, (ScopeTerm("Terminating"),)),), GROW, MEM, None, 2),
    ("terminating-quota-counts-deadline-pods", three_medium(pods=PodShape(terminating=True)),
     (Quota("batch", 0, 0, (ScopeTerm("Terminating"),)),), GROW, MEM, None, R.QUOTA_EXCEEDED),
    ("scopes-are-anded", three_medium(pods=PodShape(terminating=True)),
     (Quota("high-batch", 0, 0, (ScopeTerm("Terminating"), *cls_in(HIGH))),), GROW, MEM, None, 2),
    ("scale-up-needs-one-pod-in-its-class-quota", three_medium(), (Quota("medium-gpu", 4, 3, cls_in(MED)),), SCALE,
     SAT, None, 4),
    ("scale-up-blocked-by-its-class-quota", three_medium(), (Quota("medium-gpu", 3, 3, cls_in(MED)),), SCALE, SAT,
     None, R.QUOTA_EXCEEDED),
    ("scale-up-ignores-another-class-quota", three_medium(), (Quota("high-gpu", 0, 0, cls_in(HIGH)),), SCALE, SAT,
     None, 4),
]


@pytest.mark.parametrize(("wl", "quotas", "policy", "alert", "default", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scoped_quotas(wl, quotas, policy, alert, default, expected) -> None:  # type: ignore[no-untyped-def]
    decision = decide(signal(alert, value=0.98), wl, bounds(quotas=quotas, default_class=default), policy, NOW,
                      priority_classes=CLASSES)
    if isinstance(expected, R):
        assert isinstance(decision, Skip) and decision.reason is expected, decision
    else:
        assert isinstance(decision, Action) and decision.to_value == expected, decision


def test_the_refusal_names_the_scoped_quota_and_why_every_pod_counts() -> None:
    scoped = bounds(hard=16, quotas=(Quota("high-gpu", 2, 0, cls_in(HIGH)),))
    decision = decide(signal(SAT, value=0.98), three_medium(), scoped, UP, NOW, priority_classes=CLASSES)
    detail = (f"class {MED}→{HIGH} needs 3 GPUs of quota high-gpu (replicas 3, surge 1, every pod moves into its "
              "scope), headroom 2 (hard 2, used 0)")
    assert isinstance(decision, Skip) and decision.detail == f"set-priority-up: {detail}"


def test_a_revert_of_a_priority_change_moves_every_pod_back() -> None:
    """The revert to medium must fit the medium class's quota with all replicas, as the rollout moves them."""
    wl = three_medium(priority=HIGH, annotations={**last_action("set-priority", "up", ago=timedelta(minutes=40),
                                                                    from_value=MED, to_value=HIGH),
                                                  **original(priorityClassName=MED)})
    resolved = signal(SAT, status="resolved", value=0.2)
    full = decide(resolved, wl, bounds(quotas=(Quota("medium-gpu", 4, 2, cls_in(MED)),)), POLICY, NOW,
                  priority_classes=CLASSES)
    room = decide(resolved, wl, bounds(quotas=(Quota("medium-gpu", 5, 2, cls_in(MED)),)), POLICY, NOW,
                  priority_classes=CLASSES)
    assert isinstance(full, Skip) and full.reason is R.QUOTA_EXCEEDED and "quota medium-gpu" in full.detail
    assert isinstance(room, Action) and room.to_value == MED


@pytest.mark.parametrize(("wl", "quotas", "policy", "alert", "charges"), [
    (three_medium(), (Quota("all", 16), Quota("high-gpu", 3, 0, cls_in(HIGH)), Quota("medium-gpu", 3, 3, cls_in(MED))),
     UP, SAT, (("high-gpu", 3),)),
    (three_medium(), (Quota("all", 16), Quota("medium-gpu", 8, 3, cls_in(MED))), GROW, MEM,
     (("all", 3), ("medium-gpu", 3))),
    (three_medium(), (Quota("all", 16), Quota("high-gpu", 8, 0, cls_in(HIGH))), SCALE, SAT, (("all", 1),)),
    (three_medium(containers=(Container("server", 2),)), (Quota("all", 16),),
     replace(POLICY, alerts={"GPUUnderutilized": ("resize-gpu-down",)}), "GPUUnderutilized", ()),
], ids=["priority-takes-every-replica-in-the-new-class", "growth-in-every-counting-quota", "one-more-pod",
        "a-shrink-keeps-nothing"])
def test_an_action_names_what_it_keeps_of_each_quota(wl, quotas, policy, alert, charges) -> None:  # type: ignore[no-untyped-def]
    """Action.quota_charges: what the change holds of each quota once rolled out, for the engine to reserve
    until status.used shows it (a priority change's gpu_delta is 0, yet it fills the new class's quota)."""
    decision = decide(signal(alert, value=0.2 if alert == "GPUUnderutilized" else 0.98), wl, bounds(quotas=quotas),
                      policy, NOW, priority_classes=CLASSES)
    assert isinstance(decision, Action) and decision.quota_charges == charges, decision


def test_reserving_adds_to_the_named_quotas_only() -> None:
    reserved = bounds(quotas=(Quota("a", 4, 1), Quota("b", 2, 0, cls_in(HIGH)))).reserving({"b": 2, "gone": 5})
    assert [(q.name, q.used) for q in reserved.quotas] == [("a", 1), ("b", 2)]
