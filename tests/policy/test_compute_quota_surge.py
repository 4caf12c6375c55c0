"""The CPU and memory quota checks charge a template change's surge as the pods are created: each surge pod whole
(every container, the changed one at its new value, the init containers by the max rule), and the pods of the
operator's other templates that the change starts, each to the quotas whose scope matches that pod.

kube-apiserver's quota admission charges a new pod its whole requests and limits (pkg/quota/v1/evaluator/core/
pods.go podComputeUsageHelper over resourcehelper.PodRequests / PodLimits), to every quota whose scopes match it
(podMatchesScopeFunc)."""

from __future__ import annotations

from dataclasses import replace

from reactor.core.model import (
    Action,
    Bounds,
    ComputeBounds,
    ComputeQuota,
    ComputeResources,
    Container,
    OperatorFacts,
    PodShape,
    ScopeTerm,
    Skip,
    SurgePods,
)
from reactor.core.model import SkipReason as R
from reactor.policy import ComputeFacts, decide
from tests.policy.policy_builders import NOW, POLICY, bounds, signal, workload

STARVED, NEAR = "GPUStarvedByCPU", "GPUContainerNearMemoryLimit"
TEMPLATE = replace(POLICY, cpu_apply_to="template")
GI = 1 << 30
HIGH = (ScopeTerm("PriorityClass", "In", ("high-priority-gpu",)),)


def quota(resource: str, headroom: int, *, name: str = "compute", scopes: tuple[ScopeTerm, ...] = (),
          hard: int = 20_000) -> ComputeQuota:
    return ComputeQuota(name, resource, hard=hard, used=hard - headroom, scopes=scopes)


def starved() -> object:
    return replace(signal(STARVED, value=0.1), cpu_throttling=0.5, pods=("p-1",))


def server(cpu: int = 2000) -> Container:
    return Container("server", 4, ComputeResources(cpu, cpu))


def cpu_decision(wl, *quotas: ComputeQuota):
    return decide(starved(), wl, bounds(), TEMPLATE, NOW, cpu=ComputeFacts(bounds=ComputeBounds(quotas=quotas)))


def test_a_surge_pod_is_charged_with_its_sidecar_too():
    """server 2000m → 3000m beside a 1000m sidecar, 2 replicas, surge 1: the replicas grow by 2 × 1000m, and the
    surge pod runs 4000m, not the server's 3000m alone. 6000m needed; 5500m of headroom refuses (the check used to
    count 5000m)."""
    wl = workload(containers=(server(), Container("sidecar", 0, ComputeResources(1000, 1000))))
    refused = cpu_decision(wl, quota("limits.cpu", 5500))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("resize-cpu-up: server CPU 2000m→3000m needs 6000m of limits.cpu of quota compute "
                              "(2 pods, surge 1 of 4000m each), headroom 5500m (hard 20000m, used 14500m)")
    fits = cpu_decision(wl, quota("limits.cpu", 6000))
    assert isinstance(fits, Action) and fits.compute_quota_charges == ((("compute", "limits.cpu"), 2000),)


def test_a_limit_alone_is_the_sidecar_s_request():
    """A container with a limit and no request is charged its limit on the requests line (the API server defaults
    the request to it before admission)."""
    wl = workload(containers=(server(), Container("sidecar", 0, ComputeResources(None, 1000))))
    refused = cpu_decision(wl, quota("requests.cpu", 5999))
    assert isinstance(refused, Skip) and "needs 6000m of requests.cpu" in refused.detail


def test_an_init_container_counts_by_the_max_rule():
    """An 8000m init container runs alone before the 3000m pod: every new pod is charged 8000m (PodRequests'
    max(sum, init)), though the replicas do not grow at all. 5000m of headroom used to let the change through."""
    warmup = Container("warmup", 0, ComputeResources(8000, 8000))
    wl = replace(workload(containers=(server(),)), init_containers=(warmup,))
    refused = cpu_decision(wl, quota("requests.cpu", 5000))
    assert isinstance(refused, Skip)
    assert "needs 8000m of requests.cpu of quota compute (2 pods, surge 1 of 8000m each)" in refused.detail
    fits = cpu_decision(wl, quota("requests.cpu", 8000))
    assert isinstance(fits, Action) and fits.compute_quota_charges == ()


def test_a_sidecar_init_container_is_summed():
    """An init container with restartPolicy Always runs beside the containers: summed into every pod."""
    sidecar = Container("proxy", 0, ComputeResources(500, 500), sidecar=True)
    wl = replace(workload(containers=(server(),)), init_containers=(sidecar,))
    refused = cpu_decision(wl, quota("requests.cpu", 5499))
    assert isinstance(refused, Skip) and "needs 5500m of requests.cpu" in refused.detail


def operator_workload(*beside: SurgePods):
    """A RayService's worker group (class medium-priority-gpu) whose change starts a whole new RayCluster beside."""
    return replace(workload(containers=(server(),)), operator=OperatorFacts(part="workers", surge_beside=beside))


def test_the_other_templates_surge_pods_are_charged_to_the_quotas_of_their_own_class():
    """The new RayCluster's head (class high-priority-gpu, 2000m request / 4000m limit, no GPUs) falls in a quota
    scoped to its class though the changed workers never do: 3000m of limits.cpu headroom there refuses. The check
    used to skip that quota."""
    head = SurgePods(0, "high-priority-gpu", PodShape(cpu=ComputeResources(2000, 4000)), "head", count=1)
    refused = cpu_decision(operator_workload(head), quota("limits.cpu", 3000, name="high", scopes=HIGH))
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("resize-cpu-up: server CPU 2000m→3000m needs 4000m of limits.cpu of quota high (2 pods, "
                              "surge 1 of 3000m each, other templates' pods 4000m), headroom 3000m (hard 20000m, "
                              "used 17000m)")
    fits = cpu_decision(operator_workload(head), quota("limits.cpu", 4000, name="high", scopes=HIGH))
    assert isinstance(fits, Action) and fits.compute_quota_charges == ()  # the surge is transient: nothing kept


def test_an_unscoped_quota_is_charged_every_template_s_pods():
    """Workers 2 × 1000m growth + 1 surge worker of 3000m + 3 new pods of another group at 1500m each."""
    others = SurgePods(6, "medium-priority-gpu", PodShape(cpu=ComputeResources(1500, 1500)), "small", count=3)
    refused = cpu_decision(operator_workload(others), quota("requests.cpu", 9499))
    assert isinstance(refused, Skip) and "needs 9500m of requests.cpu" in refused.detail
    assert "other templates' pods 4500m" in refused.detail
    assert isinstance(cpu_decision(operator_workload(others), quota("requests.cpu", 9500)), Action)


def test_other_templates_pods_outside_a_quota_s_scope_are_not_charged_to_it():
    """A BestEffort-scoped quota counts none of these pods: full, it refuses nothing."""
    head = SurgePods(0, "high-priority-gpu", PodShape(cpu=ComputeResources(2000, 4000)), "head", count=1)
    full = quota("requests.cpu", 0, name="best-effort", scopes=(ScopeTerm("BestEffort"),))
    assert isinstance(cpu_decision(operator_workload(head), full), Action)


def test_memory_charges_the_whole_surge_pod_and_the_other_templates():
    """The memory action shares the check: 8Gi → 10Gi beside a 2Gi sidecar, and a head of 6Gi in its own class."""
    mem = Container("server", 4, memory=ComputeResources(8 * GI, 8 * GI))
    wl = workload(containers=(mem, Container("sidecar", 0, memory=ComputeResources(2 * GI, 2 * GI))))
    near = replace(signal(NEAR, value=0.95), pods=("p-1",))
    action = decide(near, wl, bounds(), TEMPLATE, NOW)
    assert isinstance(action, Action) and action.memory is not None and action.memory.limit is not None
    grow = action.memory.limit - 8 * GI
    need = 2 * grow + action.memory.limit + 2 * GI  # the replicas' growth and one surge pod, sidecar included
    lines = ComputeBounds(quotas=(quota("limits.memory", need - 1, hard=64 * GI),))
    refused = decide(near, wl, bounds(), TEMPLATE, NOW, cpu=ComputeFacts(memory_bounds=lines))
    assert isinstance(refused, Skip) and f"needs {need}B of limits.memory" in refused.detail
    head = SurgePods(0, "high-priority-gpu", PodShape(memory=ComputeResources(6 * GI, 6 * GI)), "head", count=1)
    scoped = ComputeBounds(quotas=(quota("requests.memory", 6 * GI - 1, name="high", scopes=HIGH, hard=64 * GI),))
    wl = replace(wl, operator=OperatorFacts(part="workers", surge_beside=(head,)))
    refused = decide(near, wl, bounds(), TEMPLATE, NOW, cpu=ComputeFacts(memory_bounds=scoped))
    assert isinstance(refused, Skip) and f"other templates' pods {6 * GI}B" in refused.detail


def test_in_place_charges_only_the_container_s_growth():
    """Resized in place, no pod is created: the sidecar and the other templates are not charged."""
    head = SurgePods(0, "high-priority-gpu", PodShape(cpu=ComputeResources(2000, 4000)), "head", count=1)
    wl = replace(operator_workload(head), containers=(server(), Container("sidecar", 0, ComputeResources(1000, 1000))))
    quotas = ComputeBounds(quotas=(quota("limits.cpu", 1000), quota("limits.cpu", 0, name="high", scopes=HIGH)))
    fits = decide(starved(), wl, bounds(), POLICY, NOW, cpu=ComputeFacts(bounds=quotas))
    assert isinstance(fits, Action) and fits.compute_quota_charges == ((("compute", "limits.cpu"), 1000),)


def test_a_template_raise_s_surge_pod_counts_on_the_pods_line():
    """The surge pod of a CPU raise through the template counts 1 on `pods` while both old pods still do: a full
    `pods` line refuses it; without a surge nothing is counted, and the GPU bounds are not even read."""
    full = Bounds(pod_quotas=(ComputeQuota("objects", "pods", 2, 2),))
    facts = ComputeFacts(bounds=ComputeBounds(quotas=(quota("requests.cpu", 10_000),)))
    refused = decide(starved(), workload(containers=(server(),)), full, TEMPLATE, NOW, cpu=facts)
    assert isinstance(refused, Skip) and refused.reason is R.QUOTA_EXCEEDED
    assert refused.detail == ("resize-cpu-up: server CPU 2000m→3000m needs 1 of pods of quota objects (surge 1), "
                              "headroom 0 (hard 2, used 2)")

    def unread() -> Bounds:
        raise AssertionError("read the namespace's bounds for a change that creates no pod beside the replacements")

    no_surge = decide(starved(), workload(containers=(server(),), surge=0), unread, TEMPLATE, NOW,
                      cpu=ComputeFacts(bounds=ComputeBounds()))
    assert isinstance(no_surge, Action)
