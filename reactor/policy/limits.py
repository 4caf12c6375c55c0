"""The last check before any write: the value an Action sets lies inside what the policy allows.

Independent of how the Action was reached (a strategy, or a revert to a recorded `original`): GPUs
inside gpus.min/max, the annotations and the LimitRange; replicas inside replicas.min/max and the
annotations; a PriorityClass on the ladder. Recorded state is never trusted to be in bounds (the
bounds may have changed since it was written, or it may be forged). Pure: no I/O, no clock.
"""

from __future__ import annotations

from ..annotations import GPUS, REPLICAS, changed_field
from ..model import Action, Skip, SkipReason
from .context import Context, gpu_range, replica_range


def out_of_bounds(ctx: Context, action: Action) -> Skip | None:
    """A Skip naming the bound `action.to_value` breaks, or None when it may be written."""
    field = changed_field(action.strategy)
    value = action.to_value
    what = f"{action.action} ({action.strategy}) would set {field} to {value!r}"
    if field == GPUS:
        return _in_range(value, gpu_range(ctx), what, SkipReason.AT_MIN_GPUS, SkipReason.AT_MAX_GPUS)
    if field == REPLICAS:
        return _in_range(value, replica_range(ctx), what, SkipReason.AT_MIN_REPLICAS, SkipReason.AT_MAX_REPLICAS)
    ladder = ctx.policy.priority_ladder
    if not isinstance(value, str) or value not in ladder:
        return Skip(SkipReason.PRIORITY_NOT_IN_LADDER, f"{what}, which is not on the ladder {list(ladder)}")
    return None


def _in_range(value: object, bounds: tuple[int, int], what: str, low: SkipReason, high: SkipReason) -> Skip | None:
    lo, hi = bounds
    if not isinstance(value, int) or isinstance(value, bool):
        return Skip(low, f"{what}, which is not a count")
    if value < lo:
        return Skip(low, f"{what}, below the lowest allowed {lo}")
    if value > hi:
        return Skip(high, f"{what}, above the highest allowed {hi}")
    return None
