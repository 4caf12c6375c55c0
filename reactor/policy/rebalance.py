"""Rebalancing, the pure half: which workloads may give GPUs to a saturated one whose growth the quota refused,
which gives first, and how much a donor's own change frees.

A rebalance starts where a receiver's growth was refused for lack of GPU quota only (`Skip.shortfall`: the quota
and the GPUs missing). Each workload the alert source shows idle in the same namespace is a candidate; it
qualifies only if every one of these holds, and each candidate gets a verdict with the reason:

- it is not the receiver;
- it opts in: the annotation `gpu-reactor.io/donor: "true"`, or labels matching every `rebalance.donorLabels`;
- the refusing quota counts its pods (policy/quota.py `tracks`: the same scopes as the quota check);
- its priority is lower than or equal to the receiver's (`priority_rank`), unless `rebalance.higherPriorityDonors`;
- its effective mode is enforce (never a workload in recommend or off);
- its change frees GPUs now: never a CronJob, whose change reaches only its next run (its running Job keeps its
  GPUs until it ends, so the receiver would wait for nothing and the donor be given back);
- its OWN decision on its idle signal (`decide`, with every rail it has today: bounds and minimum, LimitRange,
  cooldown, rollout in progress, HPA, operators' refusals, its own quota surge check) is an Action going "down",
  and that Action frees at least the GPUs missing in that quota (`freed`).

Ranking of those that qualify (`ranked`): lowest priority first, then the most idle (lowest measured value; a
value not measured counts as busy), then the one holding the most GPUs, then by kind and name.

Pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reactor.core.model import Action, Bounds, Kind, Mode, Shortfall, Signal, Skip, Workload, WorkloadRef
from reactor.policy.context import Context
from reactor.policy.quota import pod_gpus, tracks
from reactor.policy.values import Policy

DONOR_OPT_IN = "gpu-reactor.io/donor"
MAX_DONOR_PODS = 50  # distinct pods of the alert source's idle alerts resolved per receiver decision


@dataclass(frozen=True, slots=True)
class Candidate:
    """One workload the alert source shows idle, as the engine read and decided it."""

    workload: Workload
    signal: Signal  # its idle alerts, folded
    labels: Mapping[str, str]
    mode: Mode  # its effective mode
    decision: Action | Skip  # its own `decide` on `signal`


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a candidate may or may not give; `freed` GPUs of the refusing quota when it may."""

    ref: WorkloadRef
    qualifies: bool
    reason: str
    freed: int = 0
    action: Action | None = None
    rank: tuple[object, ...] = ()

    def line(self) -> str:
        return f"{self.ref.kind}/{self.ref.name}: {self.reason}"


def priority_rank(policy: Policy, priority_class: str | None) -> int:
    """A workload's place on the priority ladder: its index there; a class not on the ladder (or none) ranks
    below the ladder's bottom (-1). The ladder is the reactor's own order of the classes it moves workloads
    between; PriorityClass values outside it are not compared."""
    ladder = policy.priority_ladder
    return ladder.index(priority_class) if priority_class in ladder else -1


def opted_in(candidate: Candidate, policy: Policy) -> bool:
    """The donor annotation is "true", or every one of the policy's donor labels matches (an empty selector
    opts nobody in: giving is never the default)."""
    if candidate.workload.annotations.get(DONOR_OPT_IN, "").strip().lower() == "true":
        return True
    wanted = policy.rebalance_donor_labels
    return bool(wanted) and all(candidate.labels.get(k) == v for k, v in wanted.items())


def counted(workload: Workload, signal: Signal, bounds: Bounds, policy: Policy, now: datetime, quota: str,
            priority_class: str | None) -> bool:
    """Whether quota `quota` counts the workload's pods when they run under `priority_class`."""
    ctx = Context(signal, workload, bounds, policy, now)
    return any(q.name == quota and tracks(ctx, q, priority_class) for q in bounds.quotas)


def freed(action: Action, workload: Workload, signal: Signal, bounds: Bounds, policy: Policy, now: datetime,
          quota: str) -> int:
    """GPUs of quota `quota` the donor's `action` gives up once rolled out: what a shrink or scale-down takes off
    (`-gpu_delta`) where the quota counts its pods; a class change frees every replica's GPUs of a quota that
    counts the old class and not the new one, and nothing else."""
    old = workload.priority_class
    if not counted(workload, signal, bounds, policy, now, quota, old):
        return 0
    if action.action == "set-priority":
        new = action.to_value if isinstance(action.to_value, str) else None
        if counted(workload, signal, bounds, policy, now, quota, new):
            return 0
        return (workload.replicas if workload.replicas is not None else 1) * pod_gpus(workload)
    return max(0, -action.gpu_delta)


def qualify(candidate: Candidate, *, receiver: Workload, shortfall: Shortfall, bounds: Bounds, policy: Policy,
            now: datetime) -> Verdict:
    """The verdict on one candidate (see the module's list, checked in that order)."""
    workload = candidate.workload
    ref = workload.ref

    def no(reason: str) -> Verdict:
        return Verdict(ref, False, reason)

    if ref == receiver.ref:
        return no("is the receiver")
    if not opted_in(candidate, policy):
        labels = ", ".join(f"{k}={v}" for k, v in sorted(policy.rebalance_donor_labels.items()))
        return no(f"not opted in (annotation {DONOR_OPT_IN}: \"true\"" + (f" or labels {labels})" if labels else ")"))
    if not counted(workload, candidate.signal, bounds, policy, now, shortfall.quota, workload.priority_class):
        return no(f"quota {shortfall.quota} does not count its pods")
    mine, theirs = priority_rank(policy, workload.priority_class), priority_rank(policy, receiver.priority_class)
    if mine > theirs and not policy.rebalance_higher_priority_donors:
        return no(f"priority {workload.priority_class} is higher than the receiver's {receiver.priority_class}")
    if candidate.mode is not Mode.ENFORCE:
        return no(f"mode {candidate.mode.value}: a donor must be in enforce")
    if ref.kind == Kind.CRONJOB:
        return no("a CronJob's change reaches only its next run: its running Job keeps its GPUs until it ends")
    decision = candidate.decision
    if isinstance(decision, Skip):
        return no(f"its own decision on {candidate.signal.alert}: {decision.reason.value}: {decision.detail}")
    if decision.direction != "down":
        return no(f"its own decision on {candidate.signal.alert} is {decision.strategy}, not a shrink")
    gives = freed(decision, workload, candidate.signal, bounds, policy, now, shortfall.quota)
    if gives < shortfall.gpus:
        return no(f"{decision.strategy} {decision.from_value}→{decision.to_value} frees {gives} GPUs of quota "
                  f"{shortfall.quota}, {shortfall.gpus} are missing")
    value = candidate.signal.value if candidate.signal.value is not None else 1.0
    holds = (workload.replicas if workload.replicas is not None else 1) * pod_gpus(workload)
    return Verdict(ref, True, f"{decision.strategy} {decision.from_value}→{decision.to_value} frees {gives} GPUs "
                              f"of quota {shortfall.quota}", gives, decision,
                   (mine, value, -holds, ref.kind, ref.name))


def ranked(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Those that qualify, in the order they are asked: lowest priority, most idle, most GPUs, kind and name."""
    return sorted((v for v in verdicts if v.qualifies), key=lambda v: v.rank)


def no_donor(verdicts: Sequence[Verdict]) -> str:
    """The refusal's tail when nobody gives: why each candidate failed (or that there was none)."""
    if not verdicts:
        return "no donor: the alert source shows no workload idle in the namespace"
    return "no donor: " + "; ".join(v.line() for v in verdicts)
