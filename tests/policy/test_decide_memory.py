"""decide(): the memory action. A GPU container near its memory limit gets more memory (`resize-memory-up`),
sized by `memory.step`, within `memory.max`, the LimitRange and the memory quota lines; in place only where its
resizePolicy does not restart it for memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reactor.core.model import Action, ComputeBounds, ComputeQuota, ComputeResources, Container, Skip
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from reactor.policy.memory import size_memory
from tests.policy.policy_builders import NOW, POLICY, bounds, signal, workload

NEAR = "GPUContainerNearMemoryLimit"
GI, MI = 1 << 30, 1 << 20


def mem_workload(*, request: int | None = 8 * GI, limit: int | None = 8 * GI, replicas: int = 2):
    memory = None if request is None and limit is None else ComputeResources(request, limit)
    return workload(replicas=replicas, containers=(Container("server", 4, memory=memory), Container("sidecar", 0)))


def near(pods=("p-1",)):
    return replace(signal(NEAR, value=0.95), pods=pods)


def memory_quota(resource: str, headroom: int) -> ComputeBounds:
    return ComputeBounds(quotas=(ComputeQuota("compute", resource, hard=64 * GI, used=64 * GI - headroom),))


@pytest.mark.parametrize(
    ("current", "step", "expected"),
    [
        pytest.param(ComputeResources(8 * GI, 8 * GI), 0.25, ComputeResources(10 * GI, 10 * GI), id="guaranteed-equal"),
        pytest.param(ComputeResources(4 * GI, 8 * GI), 0.25, ComputeResources(5 * GI, 10 * GI), id="burstable-ratio"),
        pytest.param(ComputeResources(None, 8 * GI), 0.25, ComputeResources(10 * GI, 10 * GI), id="request-is-limit"),
        pytest.param(ComputeResources(10**9, 10**9), 0.1, ComputeResources(1050 * MI, 1050 * MI), id="rounded-to-mib"),
        pytest.param(ComputeResources(60 * GI, 60 * GI), 0.25, ComputeResources(64 * GI, 64 * GI), id="capped"),
    ],
)
def test_size_memory(current, step, expected):
    assert size_memory(current, step=step, highest=64 * GI) == expected


def test_a_near_limit_container_gets_memory_and_keeps_its_gpus():
    decision = decide(near(), mem_workload(), bounds(), POLICY, NOW)
    assert isinstance(decision, Action), decision
    assert (decision.action, decision.strategy, decision.container) == ("resize-memory", "resize-memory-up", "server")
    assert (decision.from_value, decision.to_value) == ("8192Mi", "10240Mi")
    assert decision.memory == ComputeResources(10 * GI, 10 * GI) and decision.gpu_delta == 0
    assert decision.apply_to == "pods"


def test_the_running_pod_s_memory_is_the_base_and_its_resize_policy_decides_where_it_goes():
    facts = ComputeFacts(pod_memory={"server": ComputeResources(10 * GI, 10 * GI)})
    running = decide(near(), mem_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(running, Action) and (running.from_value, running.to_value) == ("10240Mi", "12800Mi")
    restarts = replace(facts, memory_restarts=frozenset({"server"}))
    template = decide(near(), mem_workload(), bounds(), POLICY, NOW, cpu=restarts)
    assert isinstance(template, Action) and template.apply_to == "template"
    assert template.from_value == "8192Mi", "sized from the template it changes"


@pytest.mark.parametrize(
    ("wl", "facts", "policy", "reason"),
    [
        pytest.param(mem_workload(request=None, limit=None), ComputeFacts(), POLICY, R.NOT_APPLICABLE, id="no-limit"),
        pytest.param(mem_workload(), ComputeFacts(memory_bounds=ComputeBounds(highest=8 * GI)), POLICY, R.AT_MAX_MEMORY,
                     id="limitrange-max"),
        pytest.param(mem_workload(), ComputeFacts(), replace(POLICY, memory_max_bytes=8 * GI), R.AT_MAX_MEMORY,
                     id="policy-max"),
        pytest.param(mem_workload(), ComputeFacts(memory_bounds=memory_quota("requests.memory", GI)), POLICY,
                     R.QUOTA_EXCEEDED, id="requests-memory-quota"),
        pytest.param(mem_workload(), ComputeFacts(memory_bounds=memory_quota("limits.memory", GI)), POLICY,
                     R.QUOTA_EXCEEDED, id="limits-memory-quota"),
        pytest.param(mem_workload(), ComputeFacts(memory_bounds=memory_quota("memory", GI)), POLICY,
                     R.QUOTA_EXCEEDED, id="memory-quota-old-spelling"),
        pytest.param(mem_workload(request=2 * GI), ComputeFacts(memory_bounds=ComputeBounds(max_ratio=2.0)), POLICY,
                     R.NOT_APPLICABLE, id="max-limit-request-ratio"),
    ],
)
def test_resize_memory_refusals(wl, facts, policy, reason):
    decision = decide(near(), wl, bounds(), policy, NOW, cpu=facts)
    assert isinstance(decision, Skip), decision
    assert decision.reason is reason


def test_the_quota_refusal_names_the_line_and_the_headroom():
    facts = ComputeFacts(memory_bounds=memory_quota("limits.memory", 3 * GI))
    refused = decide(near(("p-1", "p-2")), mem_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert "needs 4294967296B of limits.memory of quota compute (2 pods, surge 0)" in refused.detail
    one = decide(near(), mem_workload(), bounds(), POLICY, NOW, cpu=facts)
    assert isinstance(one, Action) and one.compute_quota_charges == ((("compute", "limits.memory"), 2 * GI),)


def test_a_quota_without_memory_lines_does_not_limit_memory():
    facts = ComputeFacts(memory_bounds=ComputeBounds(), bounds=ComputeBounds(quotas=(
        ComputeQuota("compute", "limits.cpu", hard=1000, used=1000),)))
    assert isinstance(decide(near(), mem_workload(), bounds(), POLICY, NOW, cpu=facts), Action)
