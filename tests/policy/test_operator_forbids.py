"""decide(): what an operator forbids (its webhook, or a field its controller never carries) is refused by name,
`operator-forbids`, for a strategy and for a revert alike; a Kueue workload's priority is a label, refused only
where Kueue itself refuses it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from reactor.core.model import Action, OperatorFacts, Skip, WorkloadRef
from reactor.core.model import SkipReason as R
from reactor.integrations.kueue import as_managed
from reactor.policy import decide
from tests.policy.policy_builders import NOW, POLICY, bounds, last_action, original, signal, workload

CLASSES = frozenset({"medium-priority-gpu", "high-priority-gpu"})
WHY = "the JobSet webhook keeps spec.replicatedJobs immutable"


def _adapted(forbidden: dict[str, str], **changes: object):
    return replace(workload(**changes), ref=WorkloadRef("JobSet", "ml", "train"),
                   operator=OperatorFacts(refusals=forbidden))


def test_a_forbidden_strategy_is_refused_by_name() -> None:
    policy = replace(POLICY, alerts={"GPUUnderutilized": ("resize-gpu-down",)})
    got = decide(signal(value=0.1), _adapted({"resize-gpu": WHY}), bounds(), policy, NOW)
    assert isinstance(got, Skip) and got.reason is R.OPERATOR_FORBIDS
    assert got.detail == f"resize-gpu-down: JobSet train: {WHY}"


def test_the_next_strategy_the_operator_allows_applies() -> None:
    policy = replace(POLICY, alerts={"GPUSaturated": ("resize-gpu-up", "set-priority-up")})
    got = decide(signal("GPUSaturated", value=0.99), _adapted({"resize-gpu": WHY}), bounds(), policy, NOW,
                 priority_classes=CLASSES)
    assert isinstance(got, Action) and got.action == "set-priority", got
    assert [c.reason for c in got.considered] == [R.OPERATOR_FORBIDS, None]


def test_a_revert_of_a_field_the_operator_now_forbids_is_refused() -> None:
    """A change made before the operator forbade it (a RayService switched to upgradeStrategy None) is not undone
    by a write the operator would ignore."""
    boosted = {**last_action("set-priority", "up", ago=timedelta(minutes=15), from_value="medium-priority-gpu",
                           to_value="high-priority-gpu"),
               **original(priorityClassName="medium-priority-gpu")}
    wl = _adapted({"set-priority": WHY}, priority="high-priority-gpu", annotations=boosted)
    got = decide(signal("GPUSaturated", status="resolved"), wl, bounds(), POLICY, NOW, priority_classes=CLASSES)
    assert isinstance(got, Skip) and got.reason is R.OPERATOR_FORBIDS, got


def test_a_kueue_workloads_priority_is_its_label_not_the_template() -> None:
    """Kueue's view replaces the operator's verdict on priority (integrations/kueue.py as_managed): the label may
    change on Kueue v0.15+, and is immutable (refused by name) on v0.14 and older."""
    policy = replace(POLICY, alerts={"GPUSaturated": ("set-priority-up",)})
    obj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a",
                                   "kueue.x-k8s.io/priority-class": "medium-priority-gpu"}}}
    wl = as_managed(_adapted({"set-priority": WHY}), obj, lambda: True)
    got = decide(signal("GPUSaturated", value=0.99), wl, bounds(), policy, NOW, priority_classes=CLASSES)
    assert isinstance(got, Action) and got.action == "set-priority", got
    old = as_managed(_adapted({"set-priority": WHY}), obj, lambda: False)
    got = decide(signal("GPUSaturated", value=0.99), old, bounds(), policy, NOW, priority_classes=CLASSES)
    assert isinstance(got, Skip) and got.reason is R.OPERATOR_FORBIDS and "v0.14 and older" in got.detail, got
