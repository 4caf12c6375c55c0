"""The memory action of the CPU half: a GPU container near its memory limit gets more memory before it is
OOM-killed (an OOM kill of a trainer loses the work since its last checkpoint, and its GPUs sit idle while
it restarts).

Pure: no I/O, no clock. `resize_memory` sizes the raise (see `size_memory`) within `memory.max`, the
LimitRange's memory min/max and maxLimitRequestRatio, and the `requests.memory` / `limits.memory` quota
lines (the CPU's quota code, `check_compute_quota`). In place only where the container's resizePolicy
resizes memory without a restart (`Context.memory_apply_to`).
"""

from __future__ import annotations

import math

from reactor.core.model import Action, ComputeBounds, ComputeResources, Skip, SkipReason
from reactor.policy import pod
from reactor.policy.context import Context
from reactor.policy.cpu import check_compute_quota

MIB = 1 << 20  # memory sizes are rounded up to whole MiB


def size_memory(current: ComputeResources, *, step: float, highest: int) -> ComputeResources:
    """The documented rule: limit × (1 + `memory.step`), rounded up to a whole MiB, at least one MiB more,
    capped at `highest`. The request keeps its proportion to the limit (equal stays equal, so the QoS class
    never changes, and the limit/request ratio stays what the LimitRange admitted)."""
    limit = current.limit or 0
    wanted = math.ceil(limit * (1 + step) / MIB) * MIB
    new_limit = min(highest, max(limit + MIB, wanted))
    request = limit if current.request is None else current.request
    new_request = new_limit if request >= limit else min(new_limit, math.ceil(request * new_limit / limit))
    return ComputeResources(request=new_request, limit=new_limit)


def highest_memory(ctx: Context) -> int:
    """The highest memory limit the reactor may set: `memory.max`, and the LimitRange's max below it."""
    return min(ctx.policy.memory_max_bytes, ctx.memory_bounds.highest or ctx.policy.memory_max_bytes)


def resize_memory(ctx: Context, direction: str) -> Action | Skip:
    """Raise the alert's container's memory (request and limit) by `memory.step` of its limit."""
    if direction != "up":
        return Skip(SkipReason.NOT_APPLICABLE, "the reactor only raises memory (a near-limit alert never says "
                    "memory is wasted)")
    container = ctx.workload.container(ctx.signal.container)
    current = ctx.container_memory(container.name) if container is not None else None
    if container is None or current is None or not current.limit:
        named = ctx.signal.container or "(none named, and not exactly one GPU container)"
        return Skip(SkipReason.NOT_APPLICABLE, f"container {named} has no memory limit: nothing to raise")
    room = pod.limit_room(ctx, ctx.memory_bounds, "memory", container.name)
    highest = highest_memory(ctx) if room is None else min(highest_memory(ctx), room)
    target = size_memory(current, step=ctx.policy.memory_step, highest=highest)
    if target.limit is None or target.limit <= current.limit:
        return Skip(SkipReason.AT_MAX_MEMORY, f"memory limit {current.limit}B; highest allowed {highest}B")
    apply_to = ctx.memory_apply_to(container.name)
    unavailable = ctx.in_place_unavailable(apply_to)
    if unavailable is not None:
        return unavailable
    charged = check_compute_quota(ctx, ctx.memory_bounds, container.name, current, target,
                                  in_place=apply_to == "pods", unit="B", resource="memory",
                                  what=f"{container.name} memory {_mib(current.limit)}→{_mib(target.limit)}")
    if isinstance(charged, Skip):
        return charged
    return Action(action="resize-memory", direction="up", workload=ctx.workload.ref, container=container.name,
                  from_value=_mib(current.limit), to_value=_mib(target.limit), strategy="resize-memory-up",
                  memory=target, memory_before=current, apply_to=apply_to, compute_quota_charges=charged)


def revert_memory(ctx: Context, container: str | None, original: object) -> Action | Skip:
    """Back to the memory recorded before the first raise; a lowering needs no quota, but stays inside the
    LimitRange (a tenant may have raised its min since)."""
    current = ctx.container_memory(container) if container is not None else None
    if not isinstance(original, ComputeResources) or current is None or original.limit is None or container is None:
        return Skip(SkipReason.NOTHING_TO_REVERT, f"recorded original {original!r} does not fit the memory of "
                    f"{container}")
    unavailable = ctx.in_place_unavailable(ctx.memory_apply_to(container))
    if unavailable is not None:
        return unavailable
    return Action(action="revert", direction="revert", workload=ctx.workload.ref, container=container,
                  from_value=_mib(current.limit or 0), to_value=_mib(original.limit), strategy="resize-memory-up",
                  memory=original, memory_before=current, apply_to=ctx.memory_apply_to(container))


def out_of_bounds(bounds: ComputeBounds, highest: int, memory: ComputeResources | None, what: str) -> Skip | None:
    """A memory write (a raise or its revert): request and limit set, the request not above the limit, the
    limit at most `highest`, the request at least the LimitRange min, limit/request within its
    maxLimitRequestRatio (LimitRanger refuses each)."""
    if memory is None or memory.limit is None or memory.request is None or not 0 < memory.request <= memory.limit:
        return Skip(SkipReason.NOT_APPLICABLE, f"{what}, which is not a request and limit to set")
    if memory.limit > highest:
        return Skip(SkipReason.AT_MAX_MEMORY, f"{what}, above the highest allowed {highest}B")
    if bounds.lowest is not None and memory.request < bounds.lowest:
        return Skip(SkipReason.BELOW_LIMIT_RANGE, f"{what}, below the LimitRange min {bounds.lowest}B")
    if bounds.max_ratio is not None and memory.limit / memory.request > bounds.max_ratio:
        return Skip(SkipReason.NOT_APPLICABLE, f"{what}, a limit/request ratio above the LimitRange's "
                    f"maxLimitRequestRatio {bounds.max_ratio:g}")
    return None


def _mib(size: int) -> str:
    """How from/to read in the record and the Event: whole MiB where exact (raises are rounded to them), else
    bytes. Exact, since the verifier finds the resized pods by this limit."""
    return f"{size // MIB}Mi" if size % MIB == 0 else str(size)
