"""decide(): the CPU half. A CPU-throttled GPU container keeps its GPUs (`cpu-bound`) and gets CPU instead."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reactor.core.model import Action, ComputeBounds, ComputeQuota, ComputeResources, Container, ScopeTerm, Skip
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from reactor.policy.cpu import size_cpu
from tests.policy.policy_builders import NOW, POLICY, bounds, signal, workload

UNDER, IDLE, STARVED = "GPUUnderutilized", "GPUIdle", "GPUStarvedByCPU"


def cpu_quota(resource: str, headroom: int, *, name: str = "compute",
              scopes: tuple[ScopeTerm, ...] = ()) -> ComputeBounds:
    return ComputeBounds(quotas=(ComputeQuota(name, resource, hard=20_000, used=20_000 - headroom, scopes=scopes),))


def cpu_workload(*, request: int | None = 2000, limit: int | None = 2000, replicas: int = 2):
    cpu = None if request is None and limit is None else ComputeResources(request, limit)
    return workload(replicas=replicas, containers=(Container("server", 4, cpu), Container("sidecar", 0)))


def throttled(alert: str, ratio: float | None, *, unknown: bool = False, value: float | None = 0.1, pods=("p-1",)):
    return replace(signal(alert, value=value), cpu_throttling=ratio, cpu_unknown=unknown, pods=pods)


@pytest.mark.parametrize(
    ("sig", "reason"),
    [
        pytest.param(throttled(UNDER, 0.6), R.CPU_BOUND, id="underutilized-throttled-60%"),
        pytest.param(throttled(UNDER, 0.25), R.CPU_BOUND, id="underutilized-at-the-threshold"),
        pytest.param(throttled(IDLE, 0.9), R.CPU_BOUND, id="idle-throttled"),
        pytest.param(throttled(UNDER, None, unknown=True), R.CPU_BOUND, id="underutilized-throttling-unknown"),
    ],
)
def test_a_cpu_starved_container_is_never_shrunk(sig, reason):
    decision = decide(sig, cpu_workload(), bounds(), POLICY, NOW)
    assert isinstance(decision, Skip)
    assert decision.reason is reason
    shrinks = [c for c in decision.considered if c.strategy in ("resize-gpu-down", "scale-replicas-down")]
    assert shrinks and all(c.reason is R.CPU_BOUND for c in shrinks)


def test_the_refusal_names_the_ratio_and_the_threshold():
    decision = decide(throttled(UNDER, 0.6), cpu_workload(), bounds(), POLICY, NOW)
    assert isinstance(decision, Skip)
    assert "60%" in decision.detail and "25%" in decision.detail


@pytest.mark.parametrize(
    ("sig", "policy"),
    [
        pytest.param(throttled(UNDER, 0.1), POLICY, id="throttled-below-the-threshold"),
        pytest.param(throttled(UNDER, None), POLICY, id="annotation-absent-claims-nothing"),
        pytest.param(throttled(UNDER, None, unknown=True), replace(POLICY, cpu_unknown_holds=False),
                     id="unknown-allowed-by-policy"),
        pytest.param(throttled(UNDER, 0.6), replace(POLICY, cpu_throttled_above=0.7), id="policy-threshold-higher"),
    ],
)
def test_a_shrink_goes_ahead_when_the_cpu_is_not_the_bottleneck(sig, policy):
    decision = decide(sig, cpu_workload(), bounds(), policy, NOW)
    assert isinstance(decision, Action)
    assert decision.strategy == "resize-gpu-down"


def test_growing_and_priority_are_not_blocked_by_throttling():
    decision = decide(throttled("GPUSaturated", 0.9, value=0.99), cpu_workload(), bounds(), POLICY, NOW)
    assert isinstance(decision, Action) and decision.direction == "up"


@pytest.mark.parametrize(
    ("current", "ratio", "expected"),
    [
        pytest.param(ComputeResources(2000, 2000), 0.5, ComputeResources(3000, 3000), id="guaranteed-stays-equal"),
        pytest.param(ComputeResources(1000, 2000), 0.5, ComputeResources(1500, 3000),
                     id="burstable-keeps-its-proportion"),
        pytest.param(ComputeResources(None, 2000), 0.5, ComputeResources(3000, 3000), id="request-defaults-to-limit"),
        pytest.param(ComputeResources(2000, 2000), 0.05, ComputeResources(2250, 2250), id="at-least-one-step"),
        pytest.param(ComputeResources(2000, 2000), None, ComputeResources(2250, 2250), id="unmeasured-one-step"),
        pytest.param(ComputeResources(2000, 2000), 0.33, ComputeResources(2750, 2750), id="rounded-up-to-the-step"),
        pytest.param(ComputeResources(2000, 2000), 1.0, ComputeResources(3500, 3500), id="capped"),
    ],
)
def test_size_cpu(current, ratio, expected):
    assert size_cpu(current, ratio, step_m=250, max_m=3500) == expected


def test_starved_container_gets_cpu_not_fewer_gpus():
    decision = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), POLICY, NOW)
    assert isinstance(decision, Action)
    assert (decision.action, decision.container, decision.from_value, decision.to_value) == (
        "resize-cpu", "server", "2000m", "3000m")
    assert decision.cpu == ComputeResources(3000, 3000)
    assert decision.gpu_delta == 0


def test_the_running_pod_s_cpu_is_the_base_when_resizing_pods():
    """After a pods-only raise the template lags: sizing from it would raise the same step twice."""
    facts = ComputeFacts(pods={"server": ComputeResources(3000, 3000)})
    decision = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(decision, Action) and decision.from_value == "3000m" and decision.to_value == "4500m"
    template = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), replace(POLICY, cpu_apply_to="template"),
                      NOW, cpu=facts)
    assert isinstance(template, Action) and template.from_value == "2000m"


@pytest.mark.parametrize(
    ("wl", "facts", "policy", "reason"),
    [
        pytest.param(cpu_workload(request=None, limit=None), ComputeFacts(), POLICY, R.NOT_APPLICABLE, id="no-cpu-limit"),
        pytest.param(cpu_workload(), ComputeFacts(bounds=ComputeBounds(highest=2000)), POLICY, R.AT_MAX_CPU,
                     id="limitrange-max"),
        pytest.param(cpu_workload(limit=16000, request=16000), ComputeFacts(), POLICY, R.AT_MAX_CPU, id="policy-max"),
        # A raise whose request stays under the LimitRange's min: not a revert, nothing to do with one (issue 21).
        pytest.param(cpu_workload(request=100, limit=2000), ComputeFacts(bounds=ComputeBounds(lowest=1000)), POLICY,
                     R.BELOW_LIMIT_RANGE, id="raise-below-limitrange-min"),
        pytest.param(cpu_workload(), ComputeFacts(bounds=cpu_quota("requests.cpu", 999)), POLICY, R.QUOTA_EXCEEDED,
                     id="requests-cpu-quota"),
        pytest.param(cpu_workload(), ComputeFacts(bounds=cpu_quota("limits.cpu", 999)), POLICY, R.QUOTA_EXCEEDED,
                     id="limits-cpu-quota"),
        pytest.param(cpu_workload(), ComputeFacts(bounds=cpu_quota("limits.cpu", 3000)),
                     replace(POLICY, cpu_apply_to="template"), R.QUOTA_EXCEEDED, id="template-counts-the-surge"),
    ],
)
def test_resize_cpu_refusals(wl, facts, policy, reason):
    decision = decide(throttled(STARVED, 0.5), wl, bounds(), policy, NOW, cpu=facts)
    assert isinstance(decision, Skip), decision
    assert decision.reason is reason


def test_in_place_quota_counts_only_the_named_pods():
    """One pod resized in place by 1000m fits 1000m of headroom; the template's rollout would not."""
    lines = cpu_quota("requests.cpu", 1000).quotas + cpu_quota("limits.cpu", 1000).quotas
    facts = ComputeFacts(bounds=ComputeBounds(quotas=lines))
    one = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(one, Action)
    assert one.compute_quota_charges == ((("compute", "requests.cpu"), 1000), (("compute", "limits.cpu"), 1000))
    two = throttled(STARVED, 0.5, pods=("p-1", "p-2"))
    refused = decide(two, cpu_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("resize-cpu-up: server CPU 2000m→3000m needs 2000m of requests.cpu of quota compute (2 pods, surge 0), "
                              "headroom 1000m (hard 20000m, used 19000m)")


def test_the_old_cpu_spelling_counts_the_requests():
    """`cpu` in a quota is requests.cpu by its older name: a raise counts against it too."""
    decision = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), POLICY, NOW,
                      cpu=ComputeFacts(bounds=cpu_quota("cpu", 999)))
    assert isinstance(decision, Skip) and "of cpu of quota compute" in decision.detail


def test_a_cpu_quota_scoped_to_another_class_neither_counts_nor_limits():
    """Scope-aware like the GPU's: a full quota of another PriorityClass is not this workload's bound, and
    nothing is charged to it; a full quota of the workload's own class refuses."""
    other = cpu_quota("requests.cpu", 0, name="high",
                      scopes=(ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),))
    decision = decide(throttled(STARVED, 0.5), cpu_workload(), bounds(), POLICY, NOW, cpu=ComputeFacts(bounds=other))
    assert isinstance(decision, Action) and decision.compute_quota_charges == ()
    own = cpu_quota("requests.cpu", 0, name="medium",
                    scopes=(ScopeTerm("PriorityClass", "In", ("medium-priority-gpu",)),))
    medium = replace(cpu_workload(), priority_class="medium-priority-gpu")
    refused = decide(throttled(STARVED, 0.5), medium, bounds(), POLICY, NOW, cpu=ComputeFacts(bounds=own))
    assert isinstance(refused, Skip) and "of quota medium" in refused.detail


def test_reserving_adds_the_notification_s_earlier_charges_line_by_line():
    b = ComputeBounds(quotas=cpu_quota("requests.cpu", 3000).quotas + cpu_quota("limits.cpu", 3000).quotas)
    reserved = b.reserving({("compute", "limits.cpu"): 2000, ("other", "limits.cpu"): 5})
    assert [q.headroom for q in reserved.quotas] == [3000, 1000]
    assert b.reserving({}) is b


def test_a_cpu_raise_records_the_original_and_its_resolve_reverts_it():
    from datetime import timedelta

    from reactor.state.annotations import read_state, state_annotations

    sig = throttled(STARVED, 0.5)
    raised = decide(sig, cpu_workload(), bounds(), POLICY, NOW)
    assert isinstance(raised, Action)
    written = state_annotations(raised, sig, cpu_workload(), timedelta(minutes=30), NOW - timedelta(minutes=20))
    assert '"cpu":{"server":{"limit":2000,"request":2000}}' in written["gpu-reactor.io/original"]
    annotations = {k: v for k, v in written.items() if v is not None}
    now_raised = workload(replicas=2, containers=(Container("server", 4, ComputeResources(3000, 3000)),),
                          annotations=annotations)
    assert read_state(annotations).invalid == ()
    resolved = replace(sig, status="resolved")
    policy = replace(POLICY, revert=("resize-cpu-up",))
    revert = decide(resolved, now_raised, bounds(), policy, NOW)
    assert isinstance(revert, Action), revert
    assert (revert.action, revert.from_value, revert.to_value, revert.cpu) == (
        "revert", "3000m", "2000m", ComputeResources(2000, 2000))
    not_by_default = decide(resolved, now_raised, bounds(), POLICY, NOW)
    assert isinstance(not_by_default, Skip) and not_by_default.reason is R.RESOLVED
    done = state_annotations(revert, resolved, now_raised, timedelta(minutes=30), NOW)
    assert done["gpu-reactor.io/original"] is None


@pytest.mark.parametrize("raw", ['{"cpu": {"server": {"limit": "2"}}}',
                                 '{"cpu": {"server": {"request": 1, "limit": -1}}}', '{"cpu": ["server"]}'])
def test_a_tampered_cpu_original_is_invalid(raw):
    from reactor.state.annotations import ORIGINAL, read_state

    assert read_state({ORIGINAL: raw}).invalid == (ORIGINAL,)
