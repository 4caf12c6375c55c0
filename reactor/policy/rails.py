"""The safety rails checked before any strategy: each returns a `Skip` to refuse, or None to go on.

Pure checks over the decision's inputs. Their order is part of the contract (see `decide`):
the first rail that refuses names the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ..model import KNOWN_ALERTS, PATCHABLE_KINDS, AlertName, LastAction, Skip, SkipReason
from .context import Context, effective_mode

Rail = Callable[[Context], "Skip | None"]

_PATCHABLE = frozenset(k.value for k in PATCHABLE_KINDS)
_OPPOSITE = {"up": "down", "down": "up"}


def unknown_alert(ctx: Context) -> Skip | None:
    name = ctx.signal.alert
    if name in KNOWN_ALERTS and ctx.policy.alerts.get(name):
        return None
    return Skip(SkipReason.UNKNOWN_ALERT, f"no strategies for alert {name!r}")


def invalid_annotation(ctx: Context) -> Skip | None:
    """Acting on an annotation we cannot read could undo what a person asked for."""
    if not ctx.state.invalid:
        return None
    return Skip(SkipReason.INVALID_ANNOTATION, f"cannot parse {', '.join(ctx.state.invalid)}")


def unauthenticated_state(ctx: Context) -> Skip | None:
    """The reactor's own annotations without a valid MAC were written or edited by someone else."""
    if not ctx.state.unauthenticated:
        return None
    names = ", ".join(ctx.state.unauthenticated)
    return Skip(SkipReason.UNAUTHENTICATED_STATE,
                f"{names} not signed with the reactor's state key (written or edited by someone else, or by an "
                "older version): remove them to let the reactor act again")


def mode_off(ctx: Context) -> Skip | None:
    if effective_mode(ctx.workload, ctx.policy) != "off":
        return None
    return Skip(SkipReason.MODE_OFF, "mode is off for this workload")


def metrics_missing(ctx: Context) -> Skip | None:
    """Whatever strategies are configured for it, a missing metric holds the current state."""
    if ctx.signal.alert != AlertName.METRICS_MISSING.value:
        return None
    return Skip(SkipReason.METRICS_MISSING, "the GPU metrics are missing: holding the current state")


def already_applied(ctx: Context) -> Skip | None:
    """Idempotence across duplicate deliveries and restarts: one action per firing."""
    last = ctx.state.last_action
    if last is None or not recorded_in(last, ctx.signal.keys):
        return None
    return Skip(SkipReason.ALREADY_APPLIED, f"firing {last.fingerprint} at {last.starts_at} was handled at {last.time.isoformat()}")


def cooldown(ctx: Context) -> Skip | None:
    until = ctx.state.cooldown_until
    if until is None or ctx.now >= until:
        return None
    return Skip(SkipReason.COOLDOWN, f"cooldown until {until.isoformat()}")


def rollout(ctx: Context) -> Skip | None:
    """A change that is still rolling out would be stacked on, and its effect not yet measured."""
    w = ctx.workload
    if not w.rolling_out:
        return None
    detail = f"generation {w.generation} observed {w.observed_generation}, updated {w.updated_replicas} of {w.replicas}"
    return Skip(SkipReason.ROLLOUT_IN_PROGRESS, detail)


def unsupported_owner(ctx: Context) -> Skip | None:
    """Jobs, ReplicaSets and bare Pods have immutable or controller-owned templates."""
    kind = ctx.workload.ref.kind
    if kind in _PATCHABLE:
        return None
    return Skip(SkipReason.UNSUPPORTED_OWNER, f"{kind} is not patched; only {', '.join(sorted(_PATCHABLE))}")


def hysteresis(ctx: Context, direction: str) -> Skip | None:
    """Acting against the last action's direction waits `reverse_after`, so the reactor cannot flap."""
    last = ctx.state.last_action
    if last is None or _OPPOSITE.get(last.direction) != direction:
        return None
    ready = last.time + ctx.policy.reverse_after
    if ctx.now >= ready:
        return None
    return Skip(SkipReason.HYSTERESIS, f"last action went {last.direction} at {last.time.isoformat()}; {direction} allowed from {ready.isoformat()}")


def recorded_in(last: LastAction, keys: Sequence[tuple[str, str]]) -> bool:
    """Is the firing recorded in `last` one of `keys`? Times compare as instants, not as spellings."""
    return any(fp == last.fingerprint and _same_time(at, last.starts_at) for fp, at in keys)


def _same_time(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return datetime.fromisoformat(a) == datetime.fromisoformat(b)
    except ValueError:
        return False


# The order is the contract: the first refusal names the reason.
BEFORE_STATUS: tuple[Rail, ...] = (unknown_alert, unauthenticated_state, invalid_annotation, mode_off, metrics_missing)
BEFORE_STRATEGIES: tuple[Rail, ...] = (already_applied, cooldown, rollout, unsupported_owner)


def first_refusal(ctx: Context, rails: Sequence[Rail]) -> Skip | None:
    for rail in rails:
        skip = rail(ctx)
        if skip is not None:
            return skip
    return None
