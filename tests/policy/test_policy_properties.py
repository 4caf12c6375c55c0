"""Properties of the pure policy, over generated inputs (hypothesis; issue 26):

- any decided Action lies within every bound it was given: the GPU range (policy, annotations, LimitRange), the
  replica range (policy, annotations), the PriorityClass ladder, and the quota headroom of the pods it creates;
- a revert of an applied action restores the value from before it;
- folding the alerts of a workload does not depend on their order;
- a Skip always carries a reason from the closed list (SkipReason), and so does every strategy it considered;
- a CPU or memory raise stays within cpu.max / memory.max, the LimitRange's min, max and maxLimitRequestRatio,
  and the headroom of every requests/limits quota line that counts the pods.

The bounds are re-derived here from their documented meaning (README: strategies and rails), not by calling
the policy's own range functions.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from reactor.core.model import (
    KNOWN_ALERTS,
    Action,
    Alert,
    Bounds,
    ComputeBounds,
    ComputeQuota,
    ComputeResources,
    Container,
    Quota,
    Signal,
    Skip,
    SkipReason,
    Status,
    Workload,
    WorkloadRef,
)
from reactor.policy import ComputeFacts, decide, fold
from reactor.policy.signals import fold_many
from reactor.policy.values import DEFAULT_ALERTS, REVERTIBLE, Policy
from reactor.state.annotations import (
    MAX_GPUS,
    MAX_REPLICAS,
    MIN_GPUS,
    MIN_REPLICAS,
    MODE,
    read_state,
    state_annotations,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STARTS = "2026-03-01T11:00:00+00:00"
KEY = ("fp-a", STARTS)
LADDER = ("low-priority-gpu", "medium-priority-gpu", "high-priority-gpu")
GPU_ALERTS = ("GPUUnderutilized", "GPUIdle", "GPUSaturated", "GPUMemorySaturated", "GPUMetricsMissing")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- the inputs -------------------------------------------------------------------------------------------

@st.composite
def policies(draw: st.DrawFn) -> Policy:
    min_gpus = draw(st.integers(1, 4))
    min_replicas = draw(st.integers(0, 3))
    return Policy(allow=("*",), min_gpus=min_gpus, max_gpus=draw(st.integers(min_gpus, 8)),
                  min_replicas=min_replicas, max_replicas=draw(st.integers(min_replicas, 10)),
                  priority_ladder=LADDER[draw(st.integers(0, 1)):], target_utilization=draw(st.sampled_from(
                      (0.3, 0.6, 0.9))), cooldown=timedelta(0), reverse_after=timedelta(0))


@st.composite
def bounds(draw: st.DrawFn) -> Bounds:
    lr_min = draw(st.none() | st.integers(1, 3))
    lr_max = draw(st.none() | st.integers(lr_min or 1, 8))
    quotas = []
    for i in range(draw(st.integers(0, 2))):
        hard = draw(st.integers(0, 64))
        quotas.append(Quota(f"quota-{i}", hard, draw(st.integers(0, hard))))
    return Bounds(min_gpus=lr_min, max_gpus=lr_max, quotas=tuple(quotas))


def _counts(draw: st.DrawFn, low_key: str, high_key: str, lo: int, hi: int) -> dict[str, str]:
    """Optional min/max annotations, drawn inside [lo, hi] (an annotation outside the LimitRange is clamped
    into it by design; that clamp has its own example tests)."""
    found = {}
    low = draw(st.none() | st.integers(lo, hi))
    high = draw(st.none() | st.integers(low if low is not None else lo, hi))
    if low is not None:
        found[low_key] = str(low)
    if high is not None:
        found[high_key] = str(high)
    return found


@st.composite
def workloads(draw: st.DrawFn, policy: Policy, limits: Bounds) -> Workload:
    kind = draw(st.sampled_from(("Deployment", "Deployment", "StatefulSet", "CronJob")))
    gpus = draw(st.integers(1, 8))
    replicas = None if kind == "CronJob" else draw(st.integers(0, 10))
    annotations: dict[str, str] = {}
    annotations |= _counts(draw, MIN_GPUS, MAX_GPUS, limits.min_gpus or 1, limits.max_gpus or 8)
    annotations |= _counts(draw, MIN_REPLICAS, MAX_REPLICAS, 0, 10)
    rarely = st.sampled_from((False,) * 9 + (True,))  # sampled_from leans to its first items
    if draw(rarely):
        annotations[MODE] = draw(st.sampled_from(("enforce", "recommend", "off", "bogus")))
    if draw(rarely):
        annotations[MAX_GPUS] = draw(st.sampled_from(("lots", "-1", "1e3")))  # unreadable: refused, never guessed
    priority = draw(st.sampled_from((*policy.priority_ladder, "someone-elses", None)))
    return Workload(ref=WorkloadRef(kind, "ml", "trainer"), resource_version="7",
                    containers=(Container("server", gpus), Container("sidecar", 0)), priority_class=priority,
                    replicas=replicas, generation=3, observed_generation=3, updated_replicas=replicas,
                    max_surge=draw(st.integers(0, 2)), state=read_state(annotations), annotations=annotations)


def signal(alert: str, *, value: float | None, status: Status = Status.FIRING) -> Signal:
    return Signal(alert=alert, status=status, keys=(KEY,), container="server", value=value, fingerprint=KEY[0],
                  starts_at=KEY[1])


# --- any decided Action lies within every bound it was given ----------------------------------------------

def _gpu_bounds(policy: Policy, limits: Bounds, workload: Workload) -> tuple[int, int]:
    """Documented: at least one GPU; policy gpus.min/max; the LimitRange; min-/max-gpus only tighten."""
    state = workload.state
    lo = max(1, policy.min_gpus, limits.min_gpus or 0, state.min_gpus or 0)
    hi = min(policy.max_gpus, limits.max_gpus or policy.max_gpus, state.max_gpus or policy.max_gpus)
    return lo, hi


def _replica_bounds(policy: Policy, workload: Workload) -> tuple[int, int]:
    """Documented: min-replicas replaces the floor; max-replicas only lowers the ceiling."""
    state = workload.state
    lo = policy.min_replicas if state.min_replicas is None else state.min_replicas
    hi = policy.max_replicas if state.max_replicas is None else min(state.max_replicas, policy.max_replicas)
    return lo, hi


def _pod_gpus(workload: Workload) -> int:
    return sum(c.gpus for c in workload.containers)


def _quota_need(action: Action, workload: Workload) -> int:
    """GPUs the pods the action creates need of an (unscoped) quota: the replicas' growth plus the surge pods,
    which run the new template while every old pod still counts; added replicas at the pod's size."""
    replicas = 1 if workload.ref.kind == "CronJob" else workload.replicas or 0
    surge = 0 if workload.ref.kind == "CronJob" else workload.max_surge
    old = _pod_gpus(workload)
    if action.action == "scale-replicas":
        return max(0, int(action.to_value) - int(action.from_value)) * old  # type: ignore[arg-type]
    new = old - int(action.from_value) + int(action.to_value) if action.action == "resize-gpu" else old  # type: ignore[arg-type]
    return replicas * max(0, new - old) + surge * new


@SETTINGS
@given(st.data())
def test_any_decided_action_lies_within_every_bound_it_was_given(data: st.DataObject) -> None:
    policy = data.draw(policies())
    limits = data.draw(bounds())
    workload = data.draw(workloads(policy, limits))
    alert = data.draw(st.sampled_from(GPU_ALERTS))
    value = data.draw(st.none() | st.floats(0.0, 1.0))
    decision = decide(signal(alert, value=value), workload, limits, policy, NOW)
    if isinstance(decision, Skip):
        return
    if decision.action == "resize-gpu":
        lo, hi = _gpu_bounds(policy, limits, workload)
        assert lo <= decision.to_value <= hi, (decision, lo, hi)  # type: ignore[operator]
    elif decision.action == "scale-replicas":
        lo, hi = _replica_bounds(policy, workload)
        assert lo <= decision.to_value <= hi, (decision, lo, hi)  # type: ignore[operator]
        assert workload.ref.kind == "Deployment"  # replicas carry identity elsewhere
    elif decision.action == "set-priority":
        assert decision.to_value in policy.priority_ladder
    else:
        raise AssertionError(f"a GPU alert decided {decision.action}")
    need = _quota_need(decision, workload)
    for quota in limits.quotas:
        assert need <= max(0, quota.hard - quota.used), (decision, quota, need)
    assert not workload.state.invalid, "an unreadable annotation must refuse, not be guessed at"


# --- a Skip always carries a reason from the closed list --------------------------------------------------

_junk = st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=30)


@SETTINGS
@given(st.data())
def test_a_skip_always_carries_a_reason_from_the_closed_list(data: st.DataObject) -> None:
    policy = data.draw(policies())
    limits = data.draw(bounds())
    workload = data.draw(workloads(policy, limits))
    # Hostile or stale state annotations too: whatever the reactor finds, it answers with a listed reason.
    extra = data.draw(st.dictionaries(st.sampled_from(
        ("gpu-reactor.io/last-action", "gpu-reactor.io/original", "gpu-reactor.io/cooldown-until",
         "gpu-reactor.io/verification", MODE)), _junk | st.just(json.dumps({"action": "resize-gpu"})), max_size=2))
    annotations = {**workload.annotations, **extra}
    workload = replace(workload, annotations=annotations, state=read_state(annotations))
    alert = data.draw(st.sampled_from((*sorted(KNOWN_ALERTS), "SomethingElse")))
    status = data.draw(st.sampled_from(tuple(Status)))
    decision = decide(signal(alert, value=data.draw(st.none() | st.floats(0, 1)), status=status), workload, limits,
                      policy, NOW)
    if isinstance(decision, Skip):
        assert isinstance(decision.reason, SkipReason)
        assert isinstance(decision.detail, str) and decision.detail
        for considered in decision.considered:
            assert considered.reason is None or isinstance(considered.reason, SkipReason)


# --- a revert of an applied action restores the value from before it --------------------------------------

def _applied(workload: Workload, action: Action, sig: Signal, policy: Policy) -> Workload:
    """The workload as the act step leaves it: the new value and the bookkeeping written in the same patch."""
    written = state_annotations(action, sig, workload, policy.cooldown, NOW)
    annotations = {k: v for k, v in {**workload.annotations, **written}.items() if v is not None}
    changes: dict[str, Any] = {"annotations": annotations, "state": read_state(annotations)}
    if action.strategy.startswith("resize-gpu"):  # a revert carries the strategy it undoes
        changes["containers"] = tuple(replace(c, gpus=int(action.to_value)) if c.name == action.container else c  # type: ignore[arg-type]
                                      for c in workload.containers)
    elif action.strategy.startswith("scale-replicas"):
        changes["replicas"] = changes["updated_replicas"] = action.to_value
    else:
        changes["priority_class"] = action.to_value
    return replace(workload, **changes)


@SETTINGS
@given(st.data())
def test_a_revert_of_an_applied_action_restores_the_value_from_before_it(data: st.DataObject) -> None:
    strategy = data.draw(st.sampled_from(sorted(s for s in REVERTIBLE if not s.startswith(("resize-cpu",
                                                                                           "resize-memory")))))
    alert = "GPUUnderutilized" if strategy.endswith("-down") else "GPUSaturated"
    policy = Policy(allow=("*",), alerts={**DEFAULT_ALERTS, alert: (strategy,)}, revert=tuple(sorted(REVERTIBLE)),
                    priority_ladder=LADDER, max_gpus=8, max_replicas=10, cooldown=timedelta(minutes=30))
    gpus = data.draw(st.integers(1, 7))
    replicas = data.draw(st.integers(1, 9))
    priority = data.draw(st.sampled_from(LADDER[1:] if strategy.endswith("-down") else LADDER[:-1]))
    kind = "Deployment" if strategy.startswith("scale") else data.draw(st.sampled_from(("Deployment", "StatefulSet")))
    workload = Workload(ref=WorkloadRef(kind, "ml", "trainer"), resource_version="7",
                        containers=(Container("server", gpus),), priority_class=priority, replicas=replicas,
                        generation=3, observed_generation=3, updated_replicas=replicas,
                        max_surge=data.draw(st.integers(0, 2)))
    limits = Bounds()
    firing = signal(alert, value=0.99 if alert == "GPUSaturated" else None)
    action = decide(firing, workload, limits, policy, NOW)
    assert isinstance(action, Action) and action.strategy == strategy, action
    changed = _applied(workload, action, firing, policy)
    later = NOW + policy.revert_after + timedelta(seconds=data.draw(st.integers(0, 3600)))
    resolved = replace(firing, status=Status.RESOLVED)
    undo = decide(resolved, changed, limits, policy, later)
    assert isinstance(undo, Action) and undo.action == "revert", undo
    assert (undo.from_value, undo.to_value) == (action.to_value, action.from_value)
    restored = _applied(changed, undo, resolved, policy)
    assert (restored.containers, restored.replicas, restored.priority_class) == \
        (workload.containers, workload.replicas, workload.priority_class)
    assert restored.state.original == {}, "the reverted dimension leaves the record"


# --- folding is order-independent --------------------------------------------------------------------------

@st.composite
def alert_groups(draw: st.DrawFn) -> list[Alert]:
    alerts = []
    for _ in range(draw(st.integers(1, 6))):
        name = draw(st.sampled_from((*sorted(KNOWN_ALERTS), "SomethingElse")))
        pod = draw(st.sampled_from(("trainer-0", "trainer-1", "trainer-2")))
        container = draw(st.sampled_from(("server", "encoder", None)))
        starts = NOW - timedelta(minutes=draw(st.integers(1, 3)))
        alerts.append(Alert(
            name=name, status=draw(st.sampled_from(tuple(Status))), labels={"alertname": name}, annotations={},
            starts_at=starts, ends_at=None, fingerprint=f"{name}/{pod}/{container}", namespace="ml", pod=pod,
            container=container, value=draw(st.none() | st.floats(0, 1)), gpus=draw(st.none() | st.integers(1, 8)),
            idle_gpus=draw(st.none() | st.integers(0, 8)), cpu_throttling=draw(st.none() | st.floats(0, 1)),
            cpu_unknown=draw(st.booleans())))
    return alerts


@SETTINGS
@given(alert_groups(), st.randoms(use_true_random=False))
def test_folding_does_not_depend_on_the_order_of_the_alerts(alerts: list[Alert], rng: Any) -> None:
    shuffled = list(alerts)
    rng.shuffle(shuffled)
    assert fold(shuffled) == fold(alerts)
    assume(len(alerts) > 1)


@SETTINGS
@given(alert_groups())
def test_one_alert_folds_as_the_general_fold_folds_it(alerts: list[Alert]) -> None:
    """fold's shortcut for a single alert (most notifications name one per workload) is the general fold's answer."""
    assert fold(alerts[:1]) == fold_many(alerts[:1])


# --- the same for the CPU half: a CPU or memory raise stays within cpu.max / memory.max, the LimitRange and the
# --- requests/limits quota lines --------------------------------------------------------------------------

MIB = 1 << 20


@st.composite
def compute_cases(draw: st.DrawFn) -> tuple[Policy, Workload, Signal, ComputeFacts, str]:
    resource = draw(st.sampled_from(("cpu", "memory")))
    grain = 1 if resource == "cpu" else MIB
    limit = grain * draw(st.integers(100, 8000))
    request = draw(st.none() | st.integers(1, limit))
    current = ComputeResources(request=request, limit=limit)
    lowest = draw(st.none() | st.integers(1, request or limit))  # the LimitRange admitted the running pod
    highest = draw(st.none() | st.integers(limit, 4 * limit))
    running = limit / (request or limit)
    ratio = draw(st.none() | st.floats(running, max(running, 8.0)))
    keys = ("cpu", "requests.cpu", "limits.cpu") if resource == "cpu" else ("memory", "requests.memory",
                                                                              "limits.memory")
    quotas = []
    for i, key in enumerate(draw(st.lists(st.sampled_from(keys), max_size=3, unique=True))):
        hard = draw(st.integers(0, 40 * limit))
        quotas.append(ComputeQuota(f"quota-{i}", key, hard, draw(st.integers(0, hard))))
    limits = ComputeBounds(lowest=lowest, highest=highest, max_ratio=ratio, quotas=tuple(quotas))
    policy = Policy(allow=("*",), cpu_apply_to=draw(st.sampled_from(("pods", "template", "both"))),
                    cpu_step_m=draw(st.sampled_from((10, 250, 1000))),
                    cpu_max_m=draw(st.integers(2 * limit, 4 * limit) | st.integers(100, 64_000)),
                    memory_step=draw(st.sampled_from((0.01, 0.25, 1.0))),
                    memory_max_bytes=draw(st.integers(2 * limit, 4 * limit) | st.integers(100 * MIB, 64_000 * MIB)))
    replicas = draw(st.integers(1, 6))
    container = Container("server", 1, cpu=current if resource == "cpu" else None,
                          memory=current if resource == "memory" else None)
    workload = Workload(ref=WorkloadRef("Deployment", "ml", "trainer"), resource_version="7", containers=(container,),
                        priority_class=None, replicas=replicas, generation=3, observed_generation=3,
                        updated_replicas=replicas, max_surge=draw(st.integers(0, 2)))
    alert = "GPUStarvedByCPU" if resource == "cpu" else "GPUContainerNearMemoryLimit"
    pods = tuple(f"trainer-{i}" for i in range(draw(st.integers(1, replicas))))
    sig = replace(signal(alert, value=0.99), cpu_throttling=draw(st.floats(0.0, 1.0)), pods=pods)
    facts = ComputeFacts(bounds=limits) if resource == "cpu" else ComputeFacts(memory_bounds=limits)
    return policy, workload, sig, facts, resource


@SETTINGS
@given(compute_cases())
def test_a_cpu_or_memory_raise_lies_within_every_bound_it_was_given(
        case: tuple[Policy, Workload, Signal, ComputeFacts, str]) -> None:
    policy, workload, sig, facts, resource = case
    decision = decide(sig, workload, Bounds(), policy, NOW, cpu=facts)
    if isinstance(decision, Skip):
        return
    limits = facts.bounds if resource == "cpu" else facts.memory_bounds
    assert isinstance(limits, ComputeBounds)
    before = workload.containers[0].cpu if resource == "cpu" else workload.containers[0].memory
    after = decision.cpu if resource == "cpu" else decision.memory
    assert before is not None and after is not None and after.limit is not None and after.request is not None
    most = policy.cpu_max_m if resource == "cpu" else policy.memory_max_bytes
    assert after.request <= after.limit <= min(most, limits.highest or most), (after, most, limits)
    assert after.limit > (before.limit or 0), "a raise"
    if limits.lowest is not None:
        assert after.request >= limits.lowest
    if limits.max_ratio is not None:
        assert after.limit / after.request <= limits.max_ratio, (before, after, limits.max_ratio)
    in_place = policy.cpu_apply_to == "pods"
    pods = len(sig.pods) if in_place else workload.replicas or 0
    surge = 0 if in_place else workload.max_surge
    old = {"requests": before.request if before.request is not None else before.limit or 0,
           "limits": before.limit or 0}
    new = {"requests": after.request, "limits": after.limit}
    for quota in limits.quotas:
        side = "limits" if quota.resource.startswith("limits.") else "requests"
        need = pods * max(0, new[side] - old[side]) + surge * new[side]
        assert need <= quota.headroom, (quota, need, decision)
