"""What a resolved alert may do: undo the change its own firing caused, and nothing else.

Alertmanager sends a resolve once. A resolve that arrives before `revert_after` is answered
REVERT_HOLD and the change stays: the hold is a minimum boost time, not a delay, and the next
firing of the alert decides again. A growth a donor paid for is the exception: its resolve
always undoes it (the rebalance's promise, `_paid_by_a_donor`). A revert bypasses the cooldown
(it ends the episode) but not the mode, the rollout rail, the owner kind, the quota or the
PriorityClass check.
"""

from __future__ import annotations

from dataclasses import replace

from reactor.core.model import Action, ComputeResources, LastAction, Skip, SkipReason
from reactor.policy import rails
from reactor.policy.charges import Charged, check_added_replicas, check_template_change
from reactor.policy.context import Context
from reactor.policy.cpu import revert_cpu
from reactor.policy.limits import out_of_bounds
from reactor.policy.memory import MIB, revert_memory
from reactor.policy.quota import pod_gpus, priority_beside
from reactor.policy.strategies import check_priority_class
from reactor.state.annotations import CPU, MEMORY, container_key, holds_paid_growth, original_key, original_value


def revert(ctx: Context) -> Action | Skip:
    """Action(revert) back to `original`, or why not."""
    last = ctx.state.last_action
    if last is None or last.fingerprint not in _fingerprints(ctx):
        return Skip(SkipReason.RESOLVED, "resolved alerts never trigger a change; no action of this alert to undo")
    if last.action == "revert":
        if rails.recorded_in(last, ctx.signal.keys):
            return Skip(SkipReason.ALREADY_APPLIED, f"already reverted at {last.time.isoformat()}")
        return Skip(SkipReason.NOTHING_TO_REVERT, "the last action was a revert")
    strategy = f"{last.action}-{last.direction}"
    paid = _paid_by_a_donor(ctx, last)
    if strategy not in ctx.policy.revert and not paid:
        return Skip(SkipReason.RESOLVED, f"{strategy} is not reverted by policy (revert: {list(ctx.policy.revert)})")
    target = _target(ctx, last, strategy)
    if isinstance(target, Skip):
        return target
    ready = last.time + ctx.policy.revert_after
    if ctx.now < ready and not paid:
        return Skip(SkipReason.REVERT_HOLD, f"{strategy} at {last.time.isoformat()} is kept until {ready.isoformat()}")
    blocked = rails.first_refusal(ctx, (rails.rollout, rails.unsupported_owner))
    if blocked is not None:
        return blocked
    return _checked(ctx, last, strategy, target)


def revert_stalled(ctx: Context) -> Action | Skip:
    """Action(revert) of a change whose rollout stalled (the verifier's call), or why not.

    Unlike `revert`, no resolved alert is needed and the rollout rail does not apply: the rollout
    that is in progress is the one being undone. The mode, target, bounds, quota and class checks do.
    """
    last = ctx.state.last_action
    verification = ctx.state.verification
    if last is None or last.action == "revert" or verification is None or verification.result != "pending":
        return Skip(SkipReason.NOTHING_TO_REVERT, "no pending change of the reactor's to undo")
    strategy = f"{last.action}-{last.direction}"
    target = _target(ctx, last, strategy)
    if isinstance(target, Skip):
        return target
    # The mode holds for a revert as for any change (off: nothing is written; recommend: the act step reports it).
    blocked = rails.first_refusal(ctx, (rails.mode_off, rails.unsupported_owner))
    # No template quota check: the original template's pods ran before the stalled change, and it is
    # the new pods (more GPUs, another class) that the quota or the Nodes refused. Added pods are checked.
    return blocked or _checked(ctx, last, strategy, target, template_quota=False)


def give_back(ctx: Context, receiver_uid: str) -> Action | Skip:
    """Action(revert) of a donor's change made for a rebalance (policy/rebalance.py), or why not: the rebalance
    promised it, so neither `policy.revert` nor `revertAfter` applies. Only the change the donor's sealed
    `rebalance` record names for this receiver (by uid) is undone; the rollout rail, the mode, the owner kind,
    the bounds, the quota (its added pods or surge, against the quota's status read now) and the class check do
    apply."""
    record, last = ctx.state.rebalance, ctx.state.last_action
    if record is None or record.role != "donor" or record.uid != receiver_uid:
        return Skip(SkipReason.NOTHING_TO_REVERT, "no rebalance of this receiver recorded on the donor")
    if last is None or last.action == "revert" or last.direction != "down":
        return Skip(SkipReason.NOTHING_TO_REVERT, "the donor's last change is not the shrink it gave")
    strategy = f"{last.action}-{last.direction}"
    target = _target(ctx, last, strategy)
    if isinstance(target, Skip):
        return target
    blocked = rails.first_refusal(ctx, (rails.mode_off, rails.rollout, rails.unsupported_owner))
    return blocked or _checked(ctx, last, strategy, target)


def _paid_by_a_donor(ctx: Context, last: LastAction) -> bool:
    """A growth a donor paid for (the workload holds a sealed `receiver` record): its resolve always undoes it,
    whatever `revert` and `revertAfter` say, so the donor's GPUs come back (givebacks.py restores the donor once the
    quota shows the room). A rebalance is made only because it will be undone: without this, the shipped policy
    (`revert: [set-priority-up]`) kept the receiver's growth for good and the donor's give-back was dropped."""
    record = ctx.state.rebalance
    if record is None or record.role != "receiver" or last.direction != "up":
        return False
    # The paid growth only: a later growth of the receiver's own (another alert, once its cooldown was over) keeps
    # the record, and forcing its revert would drop the record too, leaving the paid growth in place and the donor
    # owed. A record from before `paid` existed names no firing: read as it was then.
    return record.paid is None or holds_paid_growth(ctx.state)


def _fingerprints(ctx: Context) -> set[str]:
    found = {fp for fp, _ in ctx.signal.keys}
    if ctx.signal.fingerprint:
        found.add(ctx.signal.fingerprint)
    return found


def _target(ctx: Context, last: LastAction, strategy: str) -> tuple[object, object] | Skip:
    """(current, before) of the dimension `strategy` changed, where `before` is the value from before THIS
    change (the record's `from`; `before` for CPU and memory, whose `from` names the limit only): never an
    earlier change's, which `original` keeps for the GPU-hours. NOTHING_TO_REVERT when they agree or the change
    was made in another template of the resource; CHANGED_SINCE when the current value is no longer the one
    the reactor wrote (someone changed it since: a revert would overwrite their change, not undo the reactor's)."""
    if last.part != ctx.workload.part:
        return Skip(SkipReason.NOTHING_TO_REVERT, f"the change was made in template {last.part!r}, "
                                                  f"not {ctx.workload.part!r}")
    name = original_key(strategy)
    before: object = last.from_value
    if name in (CPU, MEMORY):
        before = last.before
        if before is None:  # recorded before `before` existed: the recorded original
            try:
                before = original_value(ctx.state.original, strategy=strategy,
                                        container=container_key(last.part, last.container))
            except KeyError:
                return Skip(SkipReason.NOTHING_TO_REVERT, f"no original value recorded for {strategy}")
    current = _current(ctx, strategy, last.container)
    if before is None:  # the reactor moves classes along the ladder only: it never changed one from none
        return Skip(SkipReason.NOTHING_TO_REVERT, f"no value from before the change recorded for {strategy}")
    if current is None or current == before:
        return Skip(SkipReason.NOTHING_TO_REVERT, f"{name} is already {before!r}")
    written = _written(name, current)
    if written != last.to_value:
        return Skip(SkipReason.CHANGED_SINCE, f"{name} is {written!r} now, not the {last.to_value!r} the reactor "
                                              "wrote: changed since, so there is nothing of the reactor's to undo")
    return current, before


def _written(name: str, current: object) -> object:
    """The current value as the record names what the reactor wrote (`to`)."""
    if isinstance(current, ComputeResources):
        limit = current.limit or 0
        return f"{limit}m" if name == CPU else (f"{limit // MIB}Mi" if limit % MIB == 0 else str(limit))
    return current


def _current(ctx: Context, strategy: str, container: str | None) -> object:
    name = original_key(strategy)
    if name == CPU:
        return ctx.container_compute(container) if container is not None else None
    if name == MEMORY:
        return ctx.container_memory(container) if container is not None else None
    if name == "gpus":
        found = ctx.workload.container(container) if container is not None else None
        return None if found is None else found.gpus
    if name == "replicas":
        return ctx.workload.replicas
    return ctx.workload.priority_class


def _checked(ctx: Context, last: LastAction, strategy: str, target: tuple[object, object], *,
             template_quota: bool = True) -> Action | Skip:
    """The revert, after the checks its dimension needs (bounds first, then class exists, autoscaler, quota)."""
    current, original = target
    field = original_key(strategy)
    if field == CPU:
        return revert_cpu(ctx, last.container, original)
    if field == MEMORY:
        return revert_memory(ctx, last.container, original)
    per_pod = pod_gpus(ctx.workload)
    container = last.container if field == "gpus" else None
    action = Action(action="revert", direction="revert", workload=ctx.workload.ref, container=container,
                    from_value=_scalar(current), to_value=_scalar(original), strategy=strategy)
    # The recorded original is what an attacker would aim at: its bounds are named before anything else.
    blocked = out_of_bounds(ctx, action)
    if blocked is not None:
        return blocked
    if field == "replicas" and isinstance(original, int) and isinstance(current, int):
        if ctx.hpa_managed:
            return Skip(SkipReason.HPA_MANAGED, "an autoscaler owns the replica count now")
        delta = (original - current) * per_pod
        charged = check_added_replicas(ctx, replicas=max(0, original - current), what=f"revert of {strategy}")
    elif field == "gpus" and isinstance(original, int):
        new_pod = pod_gpus(ctx.workload, container=container, gpus=original)
        delta = ctx.replicas * (new_pod - per_pod)
        charged = check_template_change(ctx, new_pod_gpus=new_pod, new_class=ctx.workload.priority_class,
                                        what=f"revert of {strategy}") if template_quota else Charged()
    elif field == "priorityClassName" and isinstance(original, str):
        delta = 0
        charged = check_priority_class(ctx, original) or (check_template_change(
            ctx, new_pod_gpus=per_pod, new_class=original, what=f"revert of {strategy}", beside=priority_beside(ctx)
        ) if template_quota else Charged())
    else:
        return Skip(SkipReason.NOTHING_TO_REVERT, f"recorded original {original!r} does not fit {field}")
    if isinstance(charged, Skip):
        return charged
    return replace(action, gpu_delta=delta, quota_charges=charged.gpus, compute_quota_charges=charged.lines)


def _scalar(value: object) -> int | str | None:
    return value if value is None or isinstance(value, (int, str)) else str(value)
