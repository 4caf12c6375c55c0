"""The last check before any write: the value an Action sets lies inside what the policy allows.

Independent of how the Action was reached (a strategy, or a revert to a recorded `original`): GPUs
inside gpus.min/max, the annotations and the LimitRange; replicas inside replicas.min/max and the
annotations; a PriorityClass on the ladder; CPU inside cpu.max and the LimitRange; memory inside memory.max
and the LimitRange (min, max, maxLimitRequestRatio); and the pod's new totals inside the LimitRange's `type: Pod`
items (policy/pod.py). Recorded state is never
trusted to be in bounds (the bounds may have changed since it was written, or it may be forged). Pure: no I/O,
no clock.
"""

from __future__ import annotations

from reactor.core.model import Action, Skip, SkipReason
from reactor.policy import memory, pod
from reactor.policy.context import Context, gpu_range, replica_range
from reactor.state.annotations import CPU, GPUS, MEMORY, REPLICAS, original_key


def out_of_bounds(ctx: Context, action: Action) -> Skip | None:
    """A Skip naming the bound `action.to_value` breaks, or None when it may be written."""
    field = original_key(action.strategy)
    value = action.to_value
    what = f"{action.action} ({action.strategy}) would set {field} to {value!r}"
    if field == GPUS:
        bounds = gpu_range(ctx) if action.container is None else pod.gpu_range(ctx, action.container, *gpu_range(ctx))
        return _in_range(value, bounds, what, SkipReason.AT_MIN_GPUS, SkipReason.AT_MAX_GPUS)
    if field == REPLICAS:
        return _in_range(value, replica_range(ctx), what, SkipReason.AT_MIN_REPLICAS, SkipReason.AT_MAX_REPLICAS)
    if field == CPU:
        return _cpu_out_of_bounds(ctx, action, what)
    if field == MEMORY:
        return memory.out_of_bounds(ctx.memory_bounds, memory.highest_memory(ctx), action.memory, what) \
            or _pod_out_of_bounds(ctx, action, "memory", what)
    ladder = ctx.policy.priority_ladder
    if not isinstance(value, str) or value not in ladder:
        return Skip(SkipReason.PRIORITY_NOT_IN_LADDER, f"{what}, which is not on the ladder {list(ladder)}")
    return None


def _cpu_out_of_bounds(ctx: Context, action: Action, what: str) -> Skip | None:
    """A CPU write (a raise or its revert): request and limit set, the limit at most `cpu.max` and inside the
    LimitRange's CPU min/max, the request not above the limit."""
    cpu = action.cpu
    if cpu is None or cpu.limit is None or cpu.request is None or cpu.request > cpu.limit:
        return Skip(SkipReason.NOT_APPLICABLE, f"{what}, which is not a request and limit to set")
    lo, hi = ctx.cpu_bounds.lowest, min(ctx.policy.cpu_max_m, ctx.cpu_bounds.highest or ctx.policy.cpu_max_m)
    if cpu.limit > hi:
        return Skip(SkipReason.AT_MAX_CPU, f"{what}, above the highest allowed {hi}m")
    if lo is not None and cpu.request < lo:
        return Skip(SkipReason.BELOW_LIMIT_RANGE, f"{what}, below the LimitRange min {lo}m")
    return _pod_out_of_bounds(ctx, action, "cpu", what)


def _pod_out_of_bounds(ctx: Context, action: Action, resource: str, what: str) -> Skip | None:
    """The pod's totals with this container's new CPU or memory, against the LimitRange's Pod items."""
    new = action.cpu if resource == "cpu" else action.memory
    if new is None or action.container is None:
        return None
    bounds = ctx.cpu_bounds if resource == "cpu" else ctx.memory_bounds
    at_max = SkipReason.AT_MAX_CPU if resource == "cpu" else SkipReason.AT_MAX_MEMORY
    return pod.compute_out_of_bounds(ctx, bounds, resource, action.container, new, what=what,
                                     unit="m" if resource == "cpu" else "B", at_max=at_max)


def _in_range(value: object, bounds: tuple[int, int], what: str, low: SkipReason, high: SkipReason) -> Skip | None:
    lo, hi = bounds
    if not isinstance(value, int) or isinstance(value, bool):
        return Skip(low, f"{what}, which is not a count")
    if value < lo:
        return Skip(low, f"{what}, below the lowest allowed {lo}")
    if value > hi:
        return Skip(high, f"{what}, above the highest allowed {hi}")
    return None
