"""The safety rails checked before any strategy: each returns a `Skip` to refuse, or None to go on.

Pure checks over the decision's inputs. Their order is part of the contract (see `decide`):
the first rail that refuses names the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from reactor.core.model import (
    KNOWN_ALERTS,
    PATCHABLE_KINDS,
    Action,
    AlertName,
    Kind,
    LastAction,
    Mode,
    Skip,
    SkipReason,
)
from reactor.policy.context import Context, effective_mode
from reactor.policy.values import Policy
from reactor.state.annotations import holds_paid_growth

Rail = Callable[[Context], Skip | None]

_PATCHABLE = frozenset(k.value for k in PATCHABLE_KINDS)
_OPPOSITE = {"up": "down", "down": "up"}


def alert_refusal(name: str, policy: Policy) -> Skip | None:
    """An alert the rules do not emit, or one the policy gives no strategy: nothing to decide.

    The engine asks this before resolving anything (no API call for a stray alert); `decide`
    asks it again through `unknown_alert`, so the answer is the same wherever it is reached.
    """
    if name in KNOWN_ALERTS and policy.alerts.get(name):
        return None
    return Skip(SkipReason.UNKNOWN_ALERT, f"alert {name!r} is not one the reactor acts on")


def owner_refusal(kind: str, name: str) -> Skip | None:
    """Only Deployments, StatefulSets and CronJobs have a template the reactor may change.

    A bare Pod's GPUs and priority are immutable; a Job's template is immutable (a CronJob's
    is changed for its next run instead); any other owner (an operator's custom resource, a
    ReplicaSet without a Deployment) would undo or fight a change made beneath it.
    """
    if kind in _PATCHABLE:
        return None
    if kind == Kind.POD:
        return Skip(SkipReason.UNSUPPORTED_OWNER, "a bare pod: its GPU resources and priority are immutable")
    if kind == Kind.JOB:
        return Skip(
            SkipReason.UNSUPPORTED_OWNER, f"Job {name} is not owned by a CronJob: its pod template is immutable"
        )
    return Skip(SkipReason.UNSUPPORTED_OWNER, f"owned by {kind} {name}, which the reactor does not change")


def unknown_alert(ctx: Context) -> Skip | None:
    return alert_refusal(ctx.signal.alert, ctx.policy)


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
                f"{names} not signed with a state key this reactor holds: written or edited by someone else, or "
                "signed with a key it was not given (state.keyFile, state.previousKeyFile); nothing is done until "
                "they verify")


def state_not_latest(ctx: Context) -> Skip | None:
    """The state ledger's refusal (state/ledger_codec.py): an older record of the reactor's put back, or its record
    removed while its windows are open. Acting on either would undo what the latest record protects."""
    if ctx.state.not_latest == "replayed":
        return Skip(SkipReason.STALE_STATE, "the reactor's record on this workload is not its latest write for it (an "
                    "older record put back): nothing is done until its latest record is back or its windows end")
    if ctx.state.not_latest == "removed":
        return Skip(SkipReason.STATE_RESET, "the reactor's record on this workload was removed while its cooldown, "
                    "hysteresis or revert was still open: a reset is not a fresh start")
    return None


def mode_off(ctx: Context) -> Skip | None:
    if effective_mode(ctx.workload, ctx.policy) != Mode.OFF:
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
    return Skip(
        SkipReason.ALREADY_APPLIED,
        f"firing {last.fingerprint} at {last.starts_at} was handled at {last.time.isoformat()}",
    )


def cooldown(ctx: Context) -> Skip | None:
    until = ctx.state.cooldown_until
    if until is None or ctx.now >= until:
        return None
    return _cooling(until, until.utcoffset())  # keyed with the offset: equal instants are spelled apart


@functools.lru_cache(maxsize=1024)
def _cooling(until: datetime, _offset: timedelta | None) -> Skip:
    """The same skip for every notification met by one cooldown (a Skip is immutable): a workload in cooldown is
    asked again with every group interval of every alert on it, and spelling the time was most of the rail's cost."""
    return Skip(SkipReason.COOLDOWN, f"cooldown until {until.isoformat()}")


def rebalance_held(ctx: Context) -> Skip | None:
    """A receiver holding the growth a donor paid for changes in nothing else until that growth is undone: its
    resolve reverts the last action only, so any other change written meanwhile would leave the paid growth in
    place for good, and the donor owed. (A record from before `paid` existed names no growth: not held.)"""
    record = ctx.state.rebalance
    if record is None or record.paid is None or not holds_paid_growth(ctx.state):
        return None  # no paid growth, or no longer the last change (the verifier reverted it): nothing is held
    return Skip(SkipReason.REBALANCE_HELD,
                f"holds {record.gpus} GPUs of quota {record.quota} given by {record.kind}/{record.name} since "
                f"{record.since.isoformat()}: nothing else changes on it until the growth they paid for is undone "
                f"(its alert, firing {record.paid[0]} at {record.paid[1]}, resolves)")


def rollout(ctx: Context) -> Skip | None:
    """A change that is still rolling out would be stacked on, and its effect not yet measured."""
    w = ctx.workload
    if not w.rolling_out:
        return None
    detail = (w.operator.rollout if w.operator is not None else "") or (
        f"generation {w.generation} observed {w.observed_generation}, updated {w.updated_replicas} of {w.replicas}")
    return Skip(SkipReason.ROLLOUT_IN_PROGRESS, detail)


def unsupported_owner(ctx: Context) -> Skip | None:
    if ctx.workload.operator is not None:  # an operator's resource the resolver found through an enabled adapter
        return None
    return owner_refusal(ctx.workload.ref.kind, ctx.workload.ref.name)


def operator_forbids(ctx: Context, action: Action) -> Skip | None:
    """A change the operator's webhook would refuse, or its controller would never carry to a pod (a JobSet's
    immutable replicatedJobs, a RayCluster without upgradeStrategy Recreate, Kueue's immutable priority label on
    v0.14 and older), by field or by field and direction (`scale-replicas-down` below a floor the operator
    clamps to). A Kueue-managed workload's priority is Kueue's to refuse (`Workload.refusals`)."""
    w = ctx.workload
    field, strategy = action.action, action.strategy
    if field == "revert":
        last = ctx.state.last_action
        field = last.action if last is not None else field
        strategy = f"{field}-{'down' if last is not None and last.direction == 'up' else 'up'}"
    why = w.refusals.get(strategy) or w.refusals.get(field)
    return None if why is None else Skip(SkipReason.OPERATOR_FORBIDS, f"{w.ref.kind} {w.ref.name}: {why}")


def hysteresis(ctx: Context, direction: str) -> Skip | None:
    """Acting against the last action's direction waits `reverse_after`, so the reactor cannot flap."""
    last = ctx.state.last_action
    if last is None or _OPPOSITE.get(last.direction) != direction:
        return None
    ready = last.time + ctx.policy.reverse_after
    if ctx.now >= ready:
        return None
    return Skip(
        SkipReason.HYSTERESIS,
        f"last action went {last.direction} at {last.time.isoformat()}; {direction} allowed from {ready.isoformat()}",
    )


def recently_reverted(ctx: Context, strategy: str) -> Skip | None:
    """A change the verifier reverted because its rollout stalled would stall again: not retried for a while."""
    verification = ctx.state.verification
    if verification is None or verification.result != "reverted" or verification.strategy != strategy:
        return None
    ready = verification.since + ctx.policy.verify_revert_window
    if ctx.now >= ready:
        return None
    return Skip(SkipReason.RECENTLY_REVERTED,
                f"{strategy} was reverted at {verification.since.isoformat()} ({verification.reason}); "
                f"not tried again before {ready.isoformat()}")


def recorded_in(last: LastAction, keys: Sequence[tuple[str, str]]) -> bool:
    """Is the firing recorded in `last` one of `keys`? Times compare as instants, not as spellings."""
    return any(fp == last.fingerprint and _same_time(at, last.starts_at) for fp, at in keys)


def _same_time(a: str, b: str) -> bool:
    return a == b or _same_instant(a, b)


@functools.lru_cache(maxsize=1024)
def _same_instant(a: str, b: str) -> bool:
    """Cached: a workload's recorded firing is compared with every new firing of the same alert while it cools down,
    the same two spellings each time."""
    try:
        return datetime.fromisoformat(a) == datetime.fromisoformat(b)
    except ValueError:
        return False


# The order is the contract: the first refusal names the reason.
BEFORE_STATUS: tuple[Rail, ...] = (unknown_alert, unauthenticated_state, state_not_latest, invalid_annotation, mode_off,
                                   metrics_missing)
BEFORE_STRATEGIES: tuple[Rail, ...] = (already_applied, rebalance_held, cooldown, rollout, unsupported_owner)


def first_refusal(ctx: Context, rails: Sequence[Rail]) -> Skip | None:
    for rail in rails:
        skip = rail(ctx)
        if skip is not None:
            return skip
    return None
