"""The CPU half of the policy: never shrink a GPU workload starved by its CPU, and give it CPU instead.

Pure: no I/O, no clock. `cpu_bound` is the rail that refuses GPU shrinks while the alert says the
container is CPU-throttled (or cannot tell); `resize_cpu` sizes a CPU raise from the throttling ratio
(see `size_cpu`) within the policy, the LimitRange and the requests.cpu / limits.cpu quotas.
"""

from __future__ import annotations

import math

from reactor.core.model import Action, ComputeBounds, ComputeResources, Skip, SkipReason, SurgePods
from reactor.policy import pod
from reactor.policy.context import Context
from reactor.policy.quota import tracks

# The strategies that take GPUs away from a workload: pointless, even harmful, when its GPUs
# wait for its CPU (data loading, decoding, tokenization).
SHRINKS = frozenset({"resize-gpu-down", "scale-replicas-down"})


def cpu_bound(ctx: Context, strategy: str) -> Skip | None:
    """CPU_BOUND for a GPU shrink when the container is throttled at or above the policy's ratio.

    "Unknown" (the rules measure CPU but found no cAdvisor series) refuses too, unless the policy
    says `cpu.unknownHolds: false`: a missing measure is never read as "not throttled". An alert
    without the annotation (rules from before the CPU half) claims nothing and is not refused.
    """
    if strategy not in SHRINKS:
        return None
    signal, above = ctx.signal, ctx.policy.cpu_throttled_above
    if signal.cpu_throttling is not None and signal.cpu_throttling >= above:
        return Skip(SkipReason.CPU_BOUND, f"CPU throttled in {signal.cpu_throttling:.0%} of periods (from {above:.0%} "
                    "a container is CPU-bound): its GPUs wait for its CPU, fewer GPUs would not help")
    if signal.cpu_unknown and ctx.policy.cpu_unknown_holds:
        return Skip(SkipReason.CPU_BOUND, "CPU throttling unknown (no cAdvisor series): not shrinking a GPU "
                    "workload that may be starved by its CPU")
    return None


def size_cpu(current: ComputeResources, throttling: float | None, *, step_m: int, max_m: int) -> ComputeResources:
    """The documented rule: limit × (1 + throttling), at least one `step` more, rounded up to `step`, capped.

    Throttled in a fraction t of its CFS periods, the container wanted more CPU in those periods;
    t more of its limit is the smallest raise that can end it. Without a measure: one step. The
    request keeps its proportion to the limit (equal stays equal, so the QoS class never changes).
    """
    limit = current.limit or 0
    wanted = math.ceil(limit * (1 + (throttling or 0.0)))
    new_limit = min(max_m, max(limit + step_m, math.ceil(wanted / step_m) * step_m))
    request = limit if current.request is None else current.request
    new_request = new_limit if request >= limit else min(new_limit, math.ceil(request * new_limit / limit))
    return ComputeResources(request=new_request, limit=new_limit)


def resize_cpu(ctx: Context, direction: str) -> Action | Skip:
    """Raise the alert's container's CPU (request and limit) in proportion to its throttling."""
    if direction != "up":
        return Skip(SkipReason.NOT_APPLICABLE, "the reactor only raises CPU (a GPU alert never says CPU is wasted)")
    container = ctx.workload.container(ctx.signal.container)
    current = ctx.container_compute(container.name) if container is not None else None
    if container is None or current is None or not current.limit:
        named = ctx.signal.container or "(none named, and not exactly one GPU container)"
        return Skip(SkipReason.NOT_APPLICABLE, f"container {named} has no CPU limit: CFS never throttles it")
    unavailable = ctx.in_place_unavailable(ctx.cpu_apply_to)
    if unavailable is not None:
        return unavailable
    highest = min(ctx.policy.cpu_max_m, ctx.cpu_bounds.highest or ctx.policy.cpu_max_m)
    room = pod.limit_room(ctx, ctx.cpu_bounds, "cpu", container.name)
    highest = highest if room is None else min(highest, room)
    target = size_cpu(current, ctx.signal.cpu_throttling, step_m=ctx.policy.cpu_step_m, max_m=highest)
    if target.limit is None or target.limit <= current.limit:
        return Skip(SkipReason.AT_MAX_CPU, f"CPU limit {current.limit}m; highest allowed {highest}m")
    charged = check_cpu_quota(ctx, container.name, current, target,
                              what=f"{container.name} CPU {current.limit}m→{target.limit}m")
    if isinstance(charged, Skip):
        return charged
    return Action(action="resize-cpu", direction="up", workload=ctx.workload.ref, container=container.name,
                  from_value=f"{current.limit}m", to_value=f"{target.limit}m", strategy="resize-cpu-up",
                  cpu=target, cpu_before=current, compute_quota_charges=charged, apply_to=_fallback(ctx))


def revert_cpu(ctx: Context, container: str | None, original: object) -> Action | Skip:
    """Back to the CPU recorded before the first raise; a lowering needs no quota, but stays above the
    LimitRange's min (a tenant may have raised it since)."""
    current = ctx.container_compute(container) if container is not None else None
    if not isinstance(original, ComputeResources) or current is None or original.limit is None:
        return Skip(SkipReason.NOTHING_TO_REVERT, f"recorded original {original!r} does not fit the CPU of {container}")
    low = ctx.cpu_bounds.lowest
    if low is not None and min(original.request or original.limit, original.limit) < low:
        return Skip(SkipReason.BELOW_LIMIT_RANGE,
                    f"original CPU {original.limit}m is below the LimitRange min {low}m")
    unavailable = ctx.in_place_unavailable(ctx.cpu_apply_to)
    if unavailable is not None:
        return unavailable
    return Action(action="revert", direction="revert", workload=ctx.workload.ref, container=container,
                  from_value=f"{current.limit}m", to_value=f"{original.limit}m", strategy="resize-cpu-up",
                  cpu=original, cpu_before=current, apply_to=_fallback(ctx))


def _fallback(ctx: Context) -> str | None:
    """The Action's `apply_to` when this server moves it off `cpu.applyTo` (`both` → template), else None."""
    return ctx.cpu_apply_to if ctx.cpu_apply_to != ctx.policy.cpu_apply_to else None


CpuCharges = tuple[tuple[tuple[str, str], int], ...]  # ((quota name, resource), amount): Action.compute_quota_charges


def check_cpu_quota(ctx: Context, container: str, current: ComputeResources, target: ComputeResources, *,
                    what: str) -> Skip | CpuCharges:
    """`check_compute_quota` for a CPU change, in place where `cpu.applyTo` is pods."""
    return check_compute_quota(ctx, ctx.cpu_bounds, container, current, target, what=what,
                               in_place=ctx.cpu_apply_to == "pods", unit="m", resource="cpu")


def check_compute_quota(ctx: Context, bounds: ComputeBounds, container: str, current: ComputeResources,
                        target: ComputeResources, *, what: str, in_place: bool, unit: str,
                        resource: str) -> Skip | CpuCharges:
    """QUOTA_EXCEEDED when a line (CPU or memory: `bounds`, `resource`) of a quota that counts the pods the change
    makes has less headroom than the change needs; else the amount it keeps of each line (reserved for the rest of
    the notification).

    In place, each pod the alerts name grows by the container's difference (the API server charges a resize its
    growth). Through the template, as the operator creates the pods and kube-apiserver's quota admission charges
    each new pod (pkg/quota/v1/evaluator/core/pods.go podComputeUsageHelper): a surge pod is charged whole — every
    container, the changed one at its new value, the init containers by the max rule (`surge_pod`) — while every
    old pod still counts, and every replica grows by the pod's difference (only that growth is kept: the surge is
    transient). The pods of the operator's other templates that the change starts (`OperatorFacts.surge_beside`: a
    RayService's whole new RayCluster, an LWS surge group's leader) are charged too, each with its own pods' whole
    requests and limits, to the quotas whose scope matches that pod (`quota.tracks`, podMatchesScopeFunc): a quota
    scoped to the head's class is charged the new head though it never counts the changed workers. `cpu` and
    `requests.cpu` (`memory` and `requests.memory`) both count the requests. `unit` names the amounts in the
    message (`m` for millicores, `B` for bytes).
    """
    beside: tuple[SurgePods, ...] = ()
    if in_place:
        old_request = current.request if current.request is not None else current.limit or 0
        sizes = {"requests": (old_request, target.request or 0), "limits": (current.limit or 0, target.limit or 0)}
        pods, surge = len(ctx.signal.pods) or ctx.replicas, 0
    else:
        old, new = surge_pod(ctx, resource, container, current), surge_pod(ctx, resource, container, target)
        sizes = {"requests": (old.request or 0, new.request or 0), "limits": (old.limit or 0, new.limit or 0)}
        pods, surge = ctx.replicas, ctx.surge
        beside = ctx.workload.operator.surge_beside if ctx.workload.operator is not None else ()
    charges: list[tuple[tuple[str, str], int]] = []
    for quota in bounds.quotas:
        line = "limits" if quota.resource.startswith("limits.") else "requests"
        others = sum(b.count * pod_line(b.pods.compute(resource), quota.resource) for b in beside
                     if tracks(ctx, quota, b.priority_class, b.pods))
        old_size, new_size = sizes[line]
        counts = tracks(ctx, quota, ctx.workload.priority_class)
        kept = pods * max(0, new_size - old_size) if counts else 0
        need = (kept + surge * new_size if counts else 0) + others
        if need > 0 and need > quota.headroom:
            each = "" if in_place else f" of {new_size}{unit} each"
            also = f", other templates' pods {others}{unit}" if others else ""
            return Skip(SkipReason.QUOTA_EXCEEDED,
                        f"{what} needs {need}{unit} of {quota.resource} of quota {quota.name} ({pods} pods, surge "
                        f"{surge}{each}{also}), headroom {quota.headroom}{unit} (hard {quota.hard}{unit}, used "
                        f"{quota.used}{unit})")
        if kept:
            charges.append((quota.key, kept))
    counted = None if in_place else _surge_counted(ctx, surge, beside, what)
    return counted or tuple(charges)


def _surge_counted(ctx: Context, surge: int, beside: tuple[SurgePods, ...], what: str) -> Skip | None:
    """QUOTA_EXCEEDED when a template change's surge pods (and the operator's other templates' new pods) do not fit
    a `pods` / `count/pods` line that counts them: each new pod counts 1 there while every old pod still does
    (pods.go PodUsageFunc). Nothing is kept: the surge is transient. Without new pods beside the replacements (no
    surge: Recreate, a StatefulSet) nothing is read."""
    if not surge and not beside:
        return None
    for quota in ctx.bounds.pod_quotas:
        others = sum(b.count for b in beside if tracks(ctx, quota, b.priority_class, b.pods))
        need = (surge if tracks(ctx, quota, ctx.workload.priority_class) else 0) + others
        if need > quota.headroom:
            also = f", other templates' pods {others}" if others else ""
            return Skip(SkipReason.QUOTA_EXCEEDED,
                        f"{what} needs {need} of {quota.resource} of quota {quota.name} (surge {surge}{also}), "
                        f"headroom {quota.headroom} (hard {quota.hard}, used {quota.used})")
    return None


def surge_pod(ctx: Context, resource: str, container: str | None = None,
              value: ComputeResources | None = None) -> ComputeResources:
    """One new pod of the template with `container` at `value` (None: the template as it is): its whole requests
    and limits of `resource` (`pod.compute_total`: every container and sidecar summed, each other init container
    by the max rule), each container as admitted (`admitted`: a limit alone is the request too, LimitRange defaults
    fill what is unset). The other containers as the template holds them: the operator makes the new pods from it,
    whatever a resize in place did to the running ones."""
    bounds = ctx.cpu_bounds if resource == "cpu" else ctx.memory_bounds
    values = [value if container is not None and c.name == container else (c.cpu if resource == "cpu" else c.memory)
              for c in ctx.workload.containers]
    inits = [(c.cpu if resource == "cpu" else c.memory, c.sidecar) for c in ctx.workload.init_containers]
    return pod.compute_total([admitted(v, bounds) for v in values], [(admitted(v, bounds), s) for v, s in inits])


def admitted(value: ComputeResources | None, bounds: ComputeBounds) -> ComputeResources | None:
    """A container's request and limit as the new pod is admitted with them: a limit alone is the request too (the
    API server's SetDefaults_Pod, before any admission plugin), then LimitRanger fills what is still unset from the
    LimitRange's defaultRequest and default (mergeContainerResources). A template that sets no CPU is charged the
    LimitRange's default for every pod."""
    if bounds.default_request is None and bounds.default_limit is None:
        return value
    request, limit = pod.request_of(value), pod.limit_of(value)
    request = bounds.default_request if request is None else request
    limit = bounds.default_limit if limit is None else limit
    return None if request is None and limit is None else ComputeResources(request=request, limit=limit)


def pod_line(pods: ComputeResources | None, resource: str) -> int:
    """One pod's amount on the quota line `resource` (`requests.cpu`, `cpu`, `limits.cpu`, ...): its requests, or
    its limits for a `limits.*` line (0 where unset)."""
    if pods is None:
        return 0
    return (pods.limit if resource.startswith("limits.") else pods.request) or 0
