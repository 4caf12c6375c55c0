"""The strategies an alert can be mapped to; each proposes one desired state or says why not.

One function per strategy family, each pure: `(ctx, direction) -> Action | Skip`. The rails
(mode, cooldown, hysteresis, ...) are checked elsewhere; these look only at the workload's shape,
its bounds and its quota.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from reactor.core.model import Action, Kind, Skip, SkipReason
from reactor.policy import pod
from reactor.policy.charges import Charged, check_added_replicas, check_template_change
from reactor.policy.context import Context, gpu_range, replica_range
from reactor.policy.cpu import resize_cpu
from reactor.policy.memory import resize_memory
from reactor.policy.quota import pod_gpus, priority_beside

Strategy = Callable[[Context, str], "Action | Skip"]

# float noise: 3 × 0.4 / 0.6 is 2.0000000000000004, and must size to 2 GPUs, not 3.
_SIZING_DIGITS = 9


def resize_gpu(ctx: Context, direction: str) -> Action | Skip:
    """Set the alert's container one step (or, shrinking with a measured value, to its need)."""
    container = ctx.workload.container(ctx.signal.container)
    if container is None or container.gpus <= 0:
        # GPUs the operator sets from elsewhere (a KServe predictor's ServingRuntime) show as none on the resource:
        # its reason, not "holds no GPU", is why nothing is written.
        why = ctx.workload.refusals.get(f"resize-gpu-{direction}") or ctx.workload.refusals.get("resize-gpu")
        if why is not None:
            return Skip(SkipReason.OPERATOR_FORBIDS, f"{ctx.workload.ref.kind} {ctx.workload.ref.name}: {why}")
        named = ctx.signal.container or "(none named, and not exactly one GPU container)"
        return Skip(SkipReason.NO_GPU_CONTAINER, f"container {named} holds no GPU")
    current = container.gpus
    lo, hi = pod.gpu_range(ctx, container.name, *gpu_range(ctx))
    if direction == "down":
        target = max(lo, min(_needed_gpus(ctx, current), hi))
        if target >= current:
            return Skip(SkipReason.AT_MIN_GPUS, f"{current} GPUs; lowest allowed {lo}, sized to {target}")
    else:
        target = current + 1
        if target > hi:
            return Skip(SkipReason.AT_MAX_GPUS, f"{current} GPUs; highest allowed {hi}")
    new_pod = pod_gpus(ctx.workload, container=container.name, gpus=target)
    charged = check_template_change(ctx, new_pod_gpus=new_pod, new_class=ctx.workload.priority_class,
                                    what=f"{container.name} {current}→{target} GPUs")
    if isinstance(charged, Skip):
        return charged
    return _action(ctx, "resize-gpu", direction, container=container.name, from_value=current, to_value=target,
                   gpu_delta=ctx.replicas * (target - current), charges=charged)


def _needed_gpus(ctx: Context, current: int) -> int:
    """GPUs that would run the measured load at the target utilization; one step without a measure."""
    value = ctx.signal.value
    if value is None:
        return current - 1
    return math.ceil(round(current * value / ctx.policy.target_utilization, _SIZING_DIGITS))


def scale_replicas(ctx: Context, direction: str) -> Action | Skip:
    """One replica more or less, for Deployments only.

    StatefulSets are left alone: their replicas carry identity and storage (a shard, a member of
    a quorum), so adding or removing one is an application decision, not a utilization one.
    """
    workload = ctx.workload
    # An adapter gives replicas only where the operator's replicas are interchangeable (InferenceService
    # minReplicas, a Ray worker group's replicas); a Notebook or a Ray head has none.
    scalable = workload.ref.kind == Kind.DEPLOYMENT.value or workload.operator is not None
    if not scalable or workload.replicas is None:
        return Skip(SkipReason.NOT_APPLICABLE, f"replicas are only changed on Deployments, not {workload.ref.kind}")
    if ctx.hpa_managed:
        return Skip(SkipReason.HPA_MANAGED, "an autoscaler owns the replica count")
    current = workload.replicas
    lo, hi = replica_range(ctx)
    per_replica = workload.operator.replica_gpus if workload.operator is not None else None
    per_pod = pod_gpus(workload) if per_replica is None else per_replica
    charged = Charged()
    if direction == "down":
        target = current - 1
        if target < lo:
            return Skip(SkipReason.AT_MIN_REPLICAS, f"{current} replicas; lowest allowed {lo}")
    else:
        target = current + 1
        if target > hi:
            return Skip(SkipReason.AT_MAX_REPLICAS, f"{current} replicas; highest allowed {hi}")
        added = check_added_replicas(ctx, replicas=1, what=f"replicas {current}→{target}")
        if isinstance(added, Skip):
            return added
        charged = added
    return _action(ctx, "scale-replicas", direction, container=None, from_value=current, to_value=target,
                   gpu_delta=(target - current) * per_pod, charges=charged)


def set_priority(ctx: Context, direction: str) -> Action | Skip:
    """Move the pod template's PriorityClass one step along the ladder."""
    ladder = ctx.policy.priority_ladder
    current = ctx.workload.priority_class
    if current is None or current not in ladder:
        return Skip(SkipReason.PRIORITY_NOT_IN_LADDER, f"class {current!r} is not in the ladder {list(ladder)}")
    index = ladder.index(current) + (1 if direction == "up" else -1)
    if not 0 <= index < len(ladder):
        return Skip(SkipReason.PRIORITY_AT_END, f"class {current!r} is the {'top' if direction == 'up' else 'bottom'}")
    target = ladder[index]
    # Kueue's priority is a label on the workload (see kueue.py): where Kueue's webhook copies it into the pod
    # template (a Deployment, a LeaderWorkerSet: v0.15+ deployment_webhook / leaderworkerset_webhook Default) the
    # pods roll with it, so it is checked for surge and quota like any template change (the pods' own
    # PriorityClass stays), with every template the label reaches (priority_beside: each KServe component rolls);
    # elsewhere no pod is replaced and it needs no quota.
    queue, rolls = ctx.workload.queue, ctx.workload.kueue is not None and ctx.workload.kueue.label_rolls
    charged = check_priority_class(ctx, target) or (Charged() if queue and not rolls else check_template_change(
        ctx, new_pod_gpus=pod_gpus(ctx.workload), new_class=current if queue else target,
        what=f"class {current}→{target}", beside=priority_beside(ctx)))
    if isinstance(charged, Skip):
        return charged
    return _action(ctx, "set-priority", direction, container=None, from_value=current, to_value=target, gpu_delta=0,
                   charges=charged)


def check_priority_class(ctx: Context, target: str | None) -> Skip | None:
    """PRIORITY_CLASS_MISSING when the cluster is known to lack the class.

    Unknown (`priority_classes` None, the caller did not read them): the ladder is trusted, since
    it is validated configuration naming the classes `deploy/` creates. Callers that can list
    PriorityClasses should, because pods with a missing class fail at admission.
    """
    known = ctx.priority_classes
    if target is None or known is None or target in known:
        return None
    return Skip(SkipReason.PRIORITY_CLASS_MISSING, f"PriorityClass {target!r} does not exist in the cluster")


def hold(ctx: Context, direction: str) -> Skip:
    """Do nothing: a metric source that is down must never read as idle."""
    return Skip(SkipReason.METRICS_MISSING, f"{ctx.signal.alert}: holding the current state")


def _action(ctx: Context, action: str, direction: str, *, container: str | None,
            from_value: int | str | None, to_value: int | str | None, gpu_delta: int, charges: Charged) -> Action:
    return Action(action=action, direction=direction, workload=ctx.workload.ref, container=container,
                  from_value=from_value, to_value=to_value, strategy=f"{action}-{direction}", gpu_delta=gpu_delta,
                  quota_charges=charges.gpus, compute_quota_charges=charges.lines)


FAMILIES: dict[str, Strategy] = {
    "resize-gpu": resize_gpu,
    "scale-replicas": scale_replicas,
    "set-priority": set_priority,
    "resize-cpu": resize_cpu,
    "resize-memory": resize_memory,
}


def run(name: str, ctx: Context) -> Action | Skip:
    """Evaluate the strategy called `name` ("resize-gpu-down", "hold", ...)."""
    if name == "hold":
        return hold(ctx, "")
    family, _, direction = name.rpartition("-")
    fn = FAMILIES.get(family)
    if fn is None or direction not in ("up", "down"):
        return Skip(SkipReason.NOT_APPLICABLE, f"unknown strategy {name!r}")
    return fn(ctx, direction)
