"""decide() where the API server cannot resize a running pod (no pods/resize: Kubernetes before 1.33, or the
InPlacePodVerticalScaling gate off): `cpu.applyTo: pods` is refused by name (`in-place-unavailable`), `both`
goes to the template alone, `template` is untouched. The fact comes from the server's discovery (ComputeFacts)."""

from __future__ import annotations

from dataclasses import replace

from reactor.core.model import Action, ComputeResources, Container, Skip
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from tests.policy.policy_builders import NOW, POLICY, bounds, signal, workload

WHY = "the API server (v1.28.0) serves no pods/resize"
NO_RESIZE = ComputeFacts(in_place_refusal=WHY, pods={"main": ComputeResources(3000, 3000)},
                         pod_memory={"server": ComputeResources(10 << 30, 10 << 30)})
GI = 1 << 30


def starved():
    return replace(signal("GPUStarvedByCPU", value=0.1), cpu_throttling=0.5, pods=("p-1",), container="main")


def near():
    return replace(signal("GPUContainerNearMemoryLimit", value=0.95), pods=("p-1",), container="server")


def cpu_workload():
    return workload(replicas=2, containers=(Container("main", 2, cpu=ComputeResources(2000, 2000)),))


def mem_workload():
    return workload(replicas=2, containers=(Container("server", 4, memory=ComputeResources(8 * GI, 8 * GI)),))


def test_apply_to_pods_is_refused_by_name_for_cpu_and_memory():
    for sig, wl in ((starved(), cpu_workload()), (near(), mem_workload())):
        decision = decide(sig, wl, bounds(), POLICY, NOW, cpu=NO_RESIZE)
        assert isinstance(decision, Skip) and decision.reason is R.IN_PLACE_UNAVAILABLE, decision
        assert decision.detail.endswith(WHY)


def test_apply_to_both_goes_to_the_template_and_sizes_from_it():
    """The running pod's 3 cores are not the base: the change goes to the template, whose CPU is 2 cores."""
    decision = decide(starved(), cpu_workload(), bounds(), replace(POLICY, cpu_apply_to="both"), NOW, cpu=NO_RESIZE)
    assert isinstance(decision, Action), decision
    assert (decision.apply_to, decision.from_value, decision.to_value) == ("template", "2000m", "3000m")
    memory = decide(near(), mem_workload(), bounds(), replace(POLICY, cpu_apply_to="both"), NOW, cpu=NO_RESIZE)
    assert isinstance(memory, Action) and (memory.apply_to, memory.from_value) == ("template", "8192Mi")


def test_where_pods_resize_is_served_nothing_changes():
    served = replace(NO_RESIZE, in_place_refusal=None)
    decision = decide(starved(), cpu_workload(), bounds(), POLICY, NOW, cpu=served)
    assert isinstance(decision, Action) and decision.apply_to is None and decision.from_value == "3000m"
    both = decide(starved(), cpu_workload(), bounds(), replace(POLICY, cpu_apply_to="both"), NOW, cpu=served)
    assert isinstance(both, Action) and both.apply_to is None


def test_apply_to_template_never_asks_the_server():
    asked = []
    facts = replace(NO_RESIZE, in_place_refusal=lambda: asked.append(1) or WHY)
    decision = decide(starved(), cpu_workload(), bounds(), replace(POLICY, cpu_apply_to="template"), NOW, cpu=facts)
    assert isinstance(decision, Action) and asked == []
