"""`decide`: one alert signal and one workload in, one `Action` or `Skip` out.

Pure: no I/O, no clock reads, no logging. Dry run and recommend mode are the engine's business:
`decide` returns the Action it would take and the engine chooses not to apply it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from reactor.core.model import Action, Bounds, Considered, Signal, Skip, SkipReason, Status, Workload
from reactor.policy import rails
from reactor.policy.context import ComputeFacts, Context, Fact, effective_mode
from reactor.policy.cpu import cpu_bound
from reactor.policy.limits import out_of_bounds
from reactor.policy.revert import give_back, revert, revert_stalled
from reactor.policy.strategies import run
from reactor.policy.values import Policy

__all__ = ["decide", "decide_given_back", "decide_stalled", "effective_mode"]

# Reasons that say a strategy does not fit this kind of workload at all; a Skip summarising a
# fall-through prefers a reason that tells what blocked a strategy that could have applied.
_STRUCTURAL = frozenset({SkipReason.NOT_APPLICABLE, SkipReason.HPA_MANAGED})


def decide(signal: Signal, workload: Workload, bounds: Fact[Bounds], policy: Policy, now: datetime, *,
           priority_classes: Fact[frozenset[str] | None] = None, hpa_managed: Fact[bool] | None = None,
           cpu: ComputeFacts | None = None) -> Action | Skip:
    """The rails in order, then the alert's strategies in order; the first that applies wins.

    Rails: unknown alert, invalid annotation, mode off, metrics missing; a resolved signal then
    goes to `revert`; a firing one meets already-applied, rebalance-held, cooldown, rollout and owner kind. Each GPU
    shrink strategy first meets `cpu_bound`: a CPU-starved container keeps its GPUs.
    The namespace facts may be readers (see `Context`): a rail that refuses reads none of them.
    `priority_classes` None means "not read": the ladder is trusted (see `check_priority_class`).
    """
    ctx = Context(signal, workload, bounds, policy, now, priority_classes, hpa_managed, cpu)
    refused = rails.first_refusal(ctx, rails.BEFORE_STATUS)
    if refused is not None:
        return refused
    if signal.status != Status.FIRING:
        reverted = revert(ctx)
        if isinstance(reverted, Action):
            reverted = rails.operator_forbids(ctx, reverted) or reverted
        return _bounded(ctx, reverted)
    refused = rails.first_refusal(ctx, rails.BEFORE_STRATEGIES)
    if refused is not None:
        return refused
    return _bounded(ctx, _first_that_applies(ctx))


def decide_stalled(signal: Signal, workload: Workload, bounds: Fact[Bounds], policy: Policy, now: datetime, *,
                   priority_classes: Fact[frozenset[str] | None] = None,
                   cpu: ComputeFacts | None = None) -> Action | Skip:
    """The verifier's question: revert the change whose rollout stalled (`revert_stalled`), or why not. The same
    facts as `decide`; the rails of state and mode first."""
    ctx = Context(signal, workload, bounds, policy, now, priority_classes, None, cpu)
    refused = rails.first_refusal(ctx, (rails.unauthenticated_state, rails.invalid_annotation, rails.mode_off))
    return refused or _with_effect(ctx, revert_stalled(ctx))


def decide_given_back(signal: Signal, workload: Workload, bounds: Fact[Bounds], policy: Policy, now: datetime,
                      receiver_uid: str, *, priority_classes: Fact[frozenset[str] | None] = None,
                      hpa_managed: Fact[bool] | None = None, cpu: ComputeFacts | None = None) -> Action | Skip:
    """A rebalance's donor gets back what it gave (`give_back`): the receiver could not grow in time, or its
    saturation resolved. The rails of state and mode first, then the give-back's own."""
    ctx = Context(signal, workload, bounds, policy, now, priority_classes, hpa_managed, cpu)
    refused = rails.first_refusal(ctx, (rails.unauthenticated_state, rails.invalid_annotation, rails.mode_off))
    if refused is not None:
        return refused
    decision = give_back(ctx, receiver_uid)
    if isinstance(decision, Action):
        decision = rails.operator_forbids(ctx, decision) or decision
    return _bounded(ctx, decision)


def _bounded(ctx: Context, decision: Action | Skip) -> Action | Skip:
    """Whatever reached it, an Action writes only a value inside the bounds (see `out_of_bounds`)."""
    if isinstance(decision, Skip):
        return decision
    refused = out_of_bounds(ctx, decision)
    return _with_effect(ctx, decision) if refused is None else replace(refused, considered=decision.considered)


_TEMPLATE = frozenset({"resize-gpu", "set-priority", "resize-cpu", "resize-memory"})


def _with_effect(ctx: Context, decision: Action | Skip) -> Action | Skip:
    """The action, saying what it does to the running pods where its operator does more than a rolling update
    (`OperatorFacts.effect`: KubeRay's Recreate deletes every pod, head included) and the change is one of the
    template (a revert: of the change it undoes). A Kueue priority label its webhook does not copy into the pod
    template rolls nothing."""
    operator = ctx.workload.operator
    if isinstance(decision, Skip) or operator is None or not operator.effect:
        return decision
    last = ctx.state.last_action
    field = last.action if decision.action == "revert" and last is not None else decision.action
    rolls = ctx.workload.kueue is None or ctx.workload.kueue.label_rolls or field != "set-priority"
    return replace(decision, effect=operator.effect) if field in _TEMPLATE and rolls else decision


def _first_that_applies(ctx: Context) -> Action | Skip:
    considered: list[Considered] = []
    for name in ctx.policy.alerts[ctx.signal.alert]:
        result = cpu_bound(ctx, name) or run(name, ctx)
        if isinstance(result, Action):
            result = (rails.operator_forbids(ctx, result) or rails.hysteresis(ctx, result.direction)
                      or rails.recently_reverted(ctx, name) or result)
        if isinstance(result, Action):
            return replace(result, considered=(*considered, Considered(name, None)))
        considered.append(Considered(name, result.reason, result.detail, result.shortfall))
        if result.reason is SkipReason.METRICS_MISSING:
            break  # `hold` ends the list: holding means trying nothing else
    return _summary(tuple(considered))


def _summary(considered: tuple[Considered, ...]) -> Skip:
    telling = [c for c in considered if c.reason not in _STRUCTURAL] or list(considered)
    if not telling:
        return Skip(SkipReason.NOT_APPLICABLE, "no strategies configured", considered)
    first = telling[0]
    assert first.reason is not None
    return Skip(first.reason, f"{first.strategy}: {first.detail}", considered, first.shortfall)
