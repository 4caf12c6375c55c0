"""LimitRange `type: Pod` items (issue 23, item 6): GPU, CPU and memory changes keep the pod's totals inside them.

LimitRanger sums the pod (plugin/pkg/admission/limitranger/admission.go, podRequests / podLimits) and refuses a
pod past a Pod item's min, max or maxLimitRequestRatio; the decision checks the same totals before writing, for a
template change and in place (the running pod's other containers), and a revert too.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from reactor.core.model import Action, Bounds, ComputeBounds, ComputeResources, Container, Skip
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from reactor.policy.pod import parts, total
from tests.policy.policy_builders import NOW, POLICY, last_action, original, signal, workload

GI = 1 << 30


@pytest.mark.parametrize(
    ("values", "inits", "expected"),
    [
        pytest.param([2000, 1200], [], 3200, id="containers-summed"),
        pytest.param([2000, None], [], 2000, id="unset-adds-nothing"),
        pytest.param([None, None], [], None, id="nothing-set"),
        pytest.param([1000, 1000], [(1000, True)], 3000, id="sidecar-added"),
        pytest.param([1000, 1000], [(1000, True), (2500, False)], 3500, id="init-after-a-sidecar-counts-with-it"),
        pytest.param([1000], [(2500, False), (1000, True)], 2500, id="init-before-the-sidecar-alone"),
    ],
)
def test_pod_totals_as_limitranger_sums_them(values, inits, expected):
    assert total(values, inits) == expected


def test_parts_keep_the_sum_and_the_init_floor_apart():
    assert parts([1, 2], [(1, True), (5, False)]) == (4, 6)


def two_gpu_containers(server: int = 6, worker: int = 2, *, init: Container | None = None):
    """A StatefulSet: its GPUs are resized (replicas carry identity), so the Pod item is what decides."""
    wl = workload(kind="StatefulSet", containers=(Container("server", server), Container("worker", worker)))
    return replace(wl, init_containers=(init,) if init else ())


def test_a_gpu_raise_past_the_pod_max_is_refused_before_writing():
    """6 + 2 GPUs under a Pod max of 8: one more for `server` would make 9 (the issue's 403)."""
    decision = decide(signal("GPUSaturated", value=0.99), two_gpu_containers(), Bounds(pod_max_gpus=8), POLICY, NOW)
    assert _gpu_refusal(decision) == (R.AT_MAX_GPUS, "6 GPUs; highest allowed 6")
    raised = decide(signal("GPUSaturated", value=0.99), two_gpu_containers(5), Bounds(pod_max_gpus=8), POLICY, NOW)
    assert isinstance(raised, Action) and (raised.action, raised.to_value) == ("resize-gpu", 6)


def _gpu_refusal(decision: Action | Skip) -> tuple[R | None, str]:
    """How resize-gpu-up was refused (the saturated ladder goes on to set-priority-up)."""
    (found,) = [c for c in decision.considered if c.strategy == "resize-gpu-up"]
    return found.reason, found.detail


def test_a_gpu_shrink_stops_at_the_pod_min():
    """4 + 2 GPUs, a Pod min of 5: `server` may go down to 3, not to the 1 its load needs."""
    decision = decide(signal("GPUUnderutilized", value=0.05), two_gpu_containers(4), Bounds(pod_min_gpus=5),
                      POLICY, NOW)
    assert isinstance(decision, Action) and (decision.from_value, decision.to_value) == (4, 3)


def test_an_init_container_past_the_pod_max_leaves_no_room():
    wl = two_gpu_containers(1, 1, init=Container("warmup", 9))
    decision = decide(signal("GPUSaturated", value=0.99), wl, Bounds(pod_max_gpus=8), POLICY, NOW)
    assert _gpu_refusal(decision)[0] is R.AT_MAX_GPUS


def cpu_workload(server: int = 2000, sidecar: int = 1000):
    return workload(containers=(Container("server", 4, ComputeResources(server, server)),
                                Container("sidecar", 0, ComputeResources(sidecar, sidecar))))


def starved():
    return replace(signal("GPUStarvedByCPU", value=0.1), cpu_throttling=0.5, pods=("p-1",))


def test_a_cpu_raise_is_sized_to_the_room_the_pod_max_leaves():
    """2 CPUs + a 1-CPU sidecar under a Pod max of 3.5: the raise stops at 2.5, not 3 (3.2 in the issue)."""
    facts = ComputeFacts(bounds=ComputeBounds(pod_highest=3500))
    decision = decide(starved(), cpu_workload(), Bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=facts)
    assert isinstance(decision, Action) and decision.to_value == "2500m", decision


def test_a_cpu_raise_with_no_room_under_the_pod_max_is_refused():
    facts = ComputeFacts(bounds=ComputeBounds(pod_highest=3000))
    decision = decide(starved(), cpu_workload(), Bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=facts)
    assert isinstance(decision, Skip) and decision.reason is R.AT_MAX_CPU


def test_in_place_the_running_pods_other_containers_count():
    """The running pod's sidecar was raised to 1.4 CPUs (the template still says 1): the room is 3.5 - 1.4."""
    facts = ComputeFacts(bounds=ComputeBounds(pod_highest=3500),
                         pods={"server": ComputeResources(2000, 2000), "sidecar": ComputeResources(1400, 1400)})
    decision = decide(starved(), cpu_workload(), Bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(decision, Action) and decision.to_value == "2100m", decision


def test_a_cpu_raise_that_breaks_the_pods_ratio_is_refused():
    """Burstable server 1 → 2 CPUs under a Pod maxLimitRequestRatio of 1.5 with a Guaranteed sidecar."""
    wl = workload(containers=(Container("server", 4, ComputeResources(500, 1000)),
                              Container("sidecar", 0, ComputeResources(1000, 1000))))
    facts = ComputeFacts(bounds=ComputeBounds(pod_max_ratio=1.4))
    decision = decide(starved(), wl, Bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=facts)
    assert isinstance(decision, Skip) and "maxLimitRequestRatio" in decision.detail, decision


def test_a_memory_raise_is_sized_to_the_pod_max():
    wl = workload(containers=(Container("server", 4, memory=ComputeResources(8 * GI, 8 * GI)),
                              Container("sidecar", 0, memory=ComputeResources(2 * GI, 2 * GI))))
    facts = ComputeFacts(memory_bounds=ComputeBounds(pod_highest=11 * GI))
    near = replace(signal("GPUContainerNearMemoryLimit", value=0.95), pods=("p-1",))
    decision = decide(near, wl, Bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=facts)
    assert isinstance(decision, Action) and decision.memory == ComputeResources(9 * GI, 9 * GI), decision
    full = ComputeFacts(memory_bounds=ComputeBounds(pod_highest=10 * GI))
    refused = decide(near, wl, Bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=full)
    assert isinstance(refused, Skip) and refused.reason is R.AT_MAX_MEMORY


def test_a_revert_below_the_pod_min_is_refused():
    """A GPU revert to 1 when the namespace has since set a Pod min of 4 (server 3 + worker 2 → 1 + 2 = 3)."""
    annotations = {**last_action("resize-gpu", "up", ago=timedelta(hours=2), container="server", from_value=1,
                                 to_value=3), **original(gpus={"server": 1})}
    state = workload(annotations=annotations).state
    wl = replace(two_gpu_containers(3), state=state, annotations=annotations)
    policy = replace(POLICY, revert=("resize-gpu-up",))
    decision = decide(signal("GPUSaturated", status="resolved", value=0.99), wl, Bounds(pod_min_gpus=4), policy, NOW)
    assert isinstance(decision, Skip) and decision.reason in (R.AT_MIN_GPUS, R.NOTHING_TO_REVERT), decision
    assert "below the lowest allowed 2" in decision.detail, decision
    reverted = decide(signal("GPUSaturated", status="resolved", value=0.99), wl, Bounds(), policy, NOW)
    assert isinstance(reverted, Action) and (reverted.direction, reverted.to_value) == ("revert", 1)
