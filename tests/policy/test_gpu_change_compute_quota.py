"""A GPU or priority change must fit every quota line its new pods are charged to, not only the GPU lines.

kube-apiserver's ResourceQuota admission charges each new pod (pkg/quota/v1/evaluator/core/pods.go PodUsageFunc) 1 on
`pods` and `count/pods`, its whole requests on `cpu`/`requests.cpu` and `memory`/`requests.memory`, its whole limits
on `limits.cpu`/`limits.memory` (podComputeUsageHelper over resourcehelper.PodRequests / PodLimits), to every quota
whose scope matches the pod (podMatchesScopeFunc). A change whose pods do not fit is patched all the same and its pods
fail FailedCreate: the policy refuses it first, naming the quota and the line."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from reactor.core.model import (
    Action,
    Bounds,
    ComputeBounds,
    ComputeQuota,
    ComputeResources,
    Container,
    OperatorFacts,
    PodShape,
    Quota,
    ScopeTerm,
    Skip,
    SurgePods,
)
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from tests.policy.policy_builders import NOW, POLICY, last_action, original, signal, workload

SAT = "GPUSaturated"
GI = 1 << 30
HIGH, MEDIUM = "high-priority-gpu", "medium-priority-gpu"


def only(*strategies: str):
    return replace(POLICY, alerts={**POLICY.alerts, SAT: strategies, "GPUUnderutilized": strategies})


def cpu_quota(headroom: int, *, resource: str = "requests.cpu", name: str = "compute", hard: int = 20_000,
              scoped_to: str | None = None) -> ComputeQuota:
    scopes = (ScopeTerm("PriorityClass", "In", (scoped_to,)),) if scoped_to else ()
    return ComputeQuota(name, resource, hard=hard, used=hard - headroom, scopes=scopes)


def trainer(*, replicas: int = 2, surge: int = 1, priority: str | None = MEDIUM, annotations=None):
    """2 replicas of a 4-GPU server (2 cores, 8 GiB) beside a 500m sidecar: each pod takes 2500m and 9 GiB."""
    containers = (Container("server", 4, ComputeResources(2000, 2000), ComputeResources(8 * GI, 8 * GI)),
                  Container("sidecar", 0, ComputeResources(500, 500), ComputeResources(GI, GI)))
    return workload(containers=containers, replicas=replicas, surge=surge, priority=priority,
                    annotations=annotations)


def gpu_bounds(*, headroom: int = 16, lines: frozenset[str] = frozenset({"cpu"}),
               pods: tuple[ComputeQuota, ...] = ()) -> Bounds:
    """An unscoped GPU quota with `headroom` GPUs, and which compute lines the namespace's quotas have."""
    return Bounds(quotas=(Quota("gpu-quota", 32, 32 - headroom),), compute_lines=lines, pod_quotas=pods)


def decided(wl, policy, *cpu: ComputeQuota, memory: tuple[ComputeQuota, ...] = (), bounds: Bounds | None = None,
            sig=None):
    lines = frozenset(({"cpu"} if cpu else set()) | ({"memory"} if memory else set()))
    facts = ComputeFacts(bounds=ComputeBounds(quotas=cpu), memory_bounds=ComputeBounds(quotas=memory))
    return decide(sig or signal(SAT, value=0.95), wl, bounds or gpu_bounds(lines=lines), policy, NOW, cpu=facts)


def test_a_replica_more_is_refused_when_the_cpu_quota_is_full_though_the_gpu_quota_has_room():
    """16 GPUs of room, 2000m of requests.cpu: one more pod needs 2500m (its sidecar too). It used to be applied,
    and its pod then refused by the API server."""
    refused = decided(trainer(), only("scale-replicas-up"), cpu_quota(2000))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("scale-replicas-up: replicas 2→3 needs 2500m of requests.cpu of quota compute (1 pods "
                              "more of 2500m each), headroom 2000m (hard 20000m, used 18000m)")
    assert refused.shortfall is None, "a rebalance moves GPUs: it cannot answer a CPU line"


def test_a_replica_more_that_fits_keeps_its_cpu_and_its_gpus():
    fits = decided(trainer(), only("scale-replicas-up"), cpu_quota(2500), cpu_quota(5000, resource="limits.cpu"))
    assert isinstance(fits, Action) and fits.to_value == 3
    assert fits.quota_charges == (("gpu-quota", 4),)
    assert fits.compute_quota_charges == ((("compute", "requests.cpu"), 2500), (("compute", "limits.cpu"), 2500))


def test_the_memory_limits_line_counts_whole_pods():
    refused = decided(trainer(), only("scale-replicas-up"),
                      memory=(cpu_quota(9 * GI - 1, resource="limits.memory", name="mem", hard=64 * GI),))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert f"needs {9 * GI}B of limits.memory of quota mem" in refused.detail


@pytest.mark.parametrize(("headroom", "fits"), [(2499, False), (2500, True)], ids=["short-by-1m", "exactly"])
def test_a_gpu_resize_needs_the_surge_pod_whole(headroom: int, fits: bool):
    """server 4→5 GPUs rolls the template: the surge pod runs 2500m while both old pods still count. Nothing is kept
    (each pod's CPU stays what it was)."""
    decision = decided(trainer(), only("resize-gpu-up"), cpu_quota(headroom))
    if fits:
        assert isinstance(decision, Action) and decision.to_value == 5
        assert decision.compute_quota_charges == ()
    else:
        assert isinstance(decision, Skip) and decision.reason is R.QUOTA_EXCEEDED
        assert ("server 4→5 GPUs needs 2500m of requests.cpu of quota compute (replicas 2, surge 1 of 2500m each)"
                in decision.detail)


def test_a_gpu_shrink_with_no_surge_needs_no_cpu():
    full = cpu_quota(0)
    decision = decided(trainer(surge=0), only("resize-gpu-down"), full, sig=signal("GPUUnderutilized", value=0.2))
    assert isinstance(decision, Action) and decision.direction == "down"
    surged = decided(trainer(surge=1), only("resize-gpu-down"), full, sig=signal("GPUUnderutilized", value=0.2))
    assert isinstance(surged, Skip) and surged.reason is R.QUOTA_EXCEEDED


def test_a_priority_move_into_a_quota_scoped_to_the_new_class_must_hold_every_pod():
    """medium → high: `high-cpu` (scoped to high-priority-gpu) never counted these pods; it will count both, 5000m.
    `medium-cpu`, full, is left as the pods roll: it does not matter."""
    medium_full = cpu_quota(0, name="medium-cpu", scoped_to=MEDIUM)
    refused = decided(trainer(), only("set-priority-up"), cpu_quota(4999, name="high-cpu", scoped_to=HIGH),
                      medium_full)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("set-priority-up: class medium-priority-gpu→high-priority-gpu needs 5000m of "
                              "requests.cpu of quota high-cpu (replicas 2, surge 1 of 2500m each, every pod moves into "
                              "its scope), headroom 4999m (hard 20000m, used 15001m)")
    fits = decided(trainer(), only("set-priority-up"), cpu_quota(5000, name="high-cpu", scoped_to=HIGH), medium_full)
    assert isinstance(fits, Action) and fits.to_value == HIGH
    assert fits.compute_quota_charges == ((("high-cpu", "requests.cpu"), 5000),)


def test_the_pod_count_lines_count_the_pods_a_change_creates():
    """`pods` counts 1 for each new pod: the replica, and the surge pod of a template change."""
    room = gpu_bounds(lines=frozenset(), pods=(ComputeQuota("objects", "count/pods", 3, 2),))
    full = gpu_bounds(lines=frozenset(), pods=(ComputeQuota("objects", "pods", 2, 2),))
    grown = decided(trainer(), only("scale-replicas-up"), bounds=room)
    assert isinstance(grown, Action) and grown.compute_quota_charges == ((("objects", "count/pods"), 1),)
    refused = decided(trainer(), only("resize-gpu-up"), bounds=full)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert "needs 1 of pods of quota objects (replicas 2, surge 1 of 1 each), headroom 0 (hard 2, used 2)" \
        in refused.detail


def test_gpu_and_cpu_both_short_names_both_and_offers_no_shortfall():
    """A donor freeing GPUs would give for a growth the CPU line still refuses: no rebalance is asked for."""
    refused = decided(trainer(), only("scale-replicas-up"), cpu_quota(0), bounds=gpu_bounds(headroom=0))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED and refused.shortfall is None
    assert "GPUs of quota gpu-quota" in refused.detail and "of requests.cpu of quota compute" in refused.detail
    gpu_only = decided(trainer(), only("scale-replicas-up"), cpu_quota(10_000), bounds=gpu_bounds(headroom=0))
    assert isinstance(gpu_only, Skip) and gpu_only.shortfall is not None


def test_the_cpu_lines_are_not_read_where_no_quota_has_one():
    """The CPU and memory bounds are readers; without a compute line in the namespace's quotas neither is called."""
    def unread() -> ComputeBounds:
        raise AssertionError("read the CPU or memory quota lines of a namespace that has none")

    facts = ComputeFacts(bounds=unread, memory_bounds=unread)
    decision = decide(signal(SAT, value=0.95), trainer(), gpu_bounds(lines=frozenset()), only("scale-replicas-up"),
                      NOW, cpu=facts)
    assert isinstance(decision, Action) and decision.compute_quota_charges == ()


def test_an_operator_s_other_template_pods_are_charged_to_the_lines_of_their_class():
    """An LWS surge group's leader (its own template, class high-priority-gpu, 4000m) falls in `high-cpu` though the
    changed workers never do."""
    leader = SurgePods(0, HIGH, PodShape(cpu=ComputeResources(4000, 4000)), "leader", count=1)
    wl = replace(trainer(), operator=OperatorFacts(part="worker", surge_beside=(leader,)))
    refused = decided(wl, only("resize-gpu-up"), cpu_quota(3999, name="high-cpu", scoped_to=HIGH))
    assert isinstance(refused, Skip)
    assert ("needs 4000m of requests.cpu of quota high-cpu (replicas 2, surge 1 of 2500m each, other templates' pods "
            "4000m)") in refused.detail
    assert isinstance(decided(wl, only("resize-gpu-up"), cpu_quota(4000, name="high-cpu", scoped_to=HIGH)), Action)


def test_a_revert_that_adds_replicas_back_needs_their_cpu():
    """The resolve of GPUIdle's scale-down brings a replica back: its pod must fit the CPU line too."""
    notes = {**last_action("scale-replicas", "down", ago=timedelta(hours=3), from_value=3, to_value=2),
             **original(replicas=3)}
    policy = replace(POLICY, revert=("scale-replicas-down",))
    resolved = signal("GPUIdle", status="resolved")
    refused = decided(trainer(annotations=notes), policy, cpu_quota(2499), sig=resolved)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert "revert of scale-replicas-down needs 2500m of requests.cpu of quota compute" in refused.detail
    reverted = decided(trainer(annotations=notes), policy, cpu_quota(2500), sig=resolved)
    assert isinstance(reverted, Action) and reverted.to_value == 3
    assert reverted.compute_quota_charges == ((("compute", "requests.cpu"), 2500),)


def test_a_group_more_charges_its_leader_to_the_lines_of_the_leader_s_class():
    """An LWS group more: 2 workers of 2500m (the workload's class, medium) and its leader from leaderTemplate
    (class high, 4000m). `high-cpu` never counts the workers, but the new leader falls in it."""
    leader = SurgePods(0, HIGH, PodShape(cpu=ComputeResources(4000, 4000)), "leader", count=1)
    wl = replace(trainer(), operator=OperatorFacts(part="worker", pods_per_replica=2, replica_beside=(leader,)))
    refused = decided(wl, only("scale-replicas-up"), cpu_quota(3999, name="high-cpu", scoped_to=HIGH))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert "needs 4000m of requests.cpu of quota high-cpu (other templates' pods 4000m), headroom 3999m" \
        in refused.detail
    fits = decided(wl, only("scale-replicas-up"), cpu_quota(4000, name="high-cpu", scoped_to=HIGH),
                   cpu_quota(9000, name="all"))
    assert isinstance(fits, Action)
    assert fits.compute_quota_charges == ((("high-cpu", "requests.cpu"), 4000), (("all", "requests.cpu"), 9000))


def test_a_container_without_cpu_is_charged_the_limit_range_default():
    """The server sets only GPUs; LimitRanger fills defaultRequest 1000m / default 2000m into it at admission
    (mergeContainerResources), the sidecar keeps its own 500m: each new pod takes 1500m of requests.cpu and 2500m
    of limits.cpu. Counting the template alone (500m) used to let a replica more through a full line."""
    containers = (Container("server", 4), Container("sidecar", 0, ComputeResources(500, 500)))
    wl = workload(containers=containers, replicas=2, surge=1, priority=MEDIUM)
    cpu = ComputeBounds(quotas=(cpu_quota(1499), cpu_quota(9000, resource="limits.cpu")),
                        default_request=1000, default_limit=2000)
    facts = ComputeFacts(bounds=cpu)
    refused = decide(signal(SAT, value=0.95), wl, gpu_bounds(), only("scale-replicas-up"), NOW, cpu=facts)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert "needs 1500m of requests.cpu of quota compute (1 pods more of 1500m each)" in refused.detail
    cpu = replace(cpu, quotas=(cpu_quota(1500), cpu_quota(9000, resource="limits.cpu")))
    fits = decide(signal(SAT, value=0.95), wl, gpu_bounds(), only("scale-replicas-up"), NOW,
                  cpu=ComputeFacts(bounds=cpu))
    assert isinstance(fits, Action)
    assert fits.compute_quota_charges == ((("compute", "requests.cpu"), 1500), (("compute", "limits.cpu"), 2500))
