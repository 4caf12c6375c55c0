"""ResourceQuota headroom for a change, quota by quota, following each quota's scope.

Quota is enforced when pods are created, not when the owner is patched: a patch that does not
fit succeeds and its new pods then fail with FailedCreate. So the policy checks the need itself,
for every quota that will count the pods the change creates. Pure arithmetic over the bounds.
"""

from __future__ import annotations

from reactor.core.model import (
    ComputeQuota,
    PodShape,
    Quota,
    ScopeTerm,
    Shortfall,
    Skip,
    SkipReason,
    SurgePods,
    Workload,
)
from reactor.policy.context import Context

Charges = tuple[tuple[str, int], ...]  # (quota name, GPUs), as Action.quota_charges


def pod_gpus(workload: Workload, *, container: str | None = None, gpus: int | None = None) -> int:
    """GPUs one pod requests, optionally with `container` set to `gpus`."""
    return sum(gpus if (c.name == container and gpus is not None) else c.gpus for c in workload.containers)


def tracks(ctx: Context, quota: Quota | ComputeQuota, priority_class: str | None, pods: PodShape | None = None) -> bool:
    """Whether `quota` counts the workload's pods when they run under `priority_class` (podMatchesScopeFunc:
    every term must match; a quota without terms counts every pod). `pods`: the shape of other pods to judge (an
    operator's other template), by default the workload's own."""
    cls = priority_class or ctx.bounds.default_priority_class
    shape = ctx.workload.pods if pods is None else pods
    return all(_term_matches(ctx, term, cls, shape) for term in quota.scopes)


def _term_matches(ctx: Context, term: ScopeTerm, cls: str | None, pods: PodShape) -> bool:
    states = {"BestEffort": pods.best_effort and not ctx.bounds.defaults_compute,
              "Terminating": pods.terminating, "CrossNamespacePodAffinity": pods.cross_namespace_affinity}
    if term.scope in states:
        return states[term.scope]
    if term.scope in ("NotBestEffort", "NotTerminating"):
        return not states[term.scope[3:]]
    if term.scope != "PriorityClass":
        return False  # a scope this version does not know: it cannot be shown to count these pods
    return _class_matches(term, cls)


def _class_matches(term: ScopeTerm, cls: str | None) -> bool:
    """A label selector over {PriorityClass: cls}; a pod without a class has no such label."""
    if term.operator == "Exists":
        return cls is not None
    if term.operator == "DoesNotExist":
        return cls is None
    if term.operator == "In":
        return cls is not None and cls in term.values
    if term.operator == "NotIn":
        return cls is None or cls not in term.values
    return False


def check_template(ctx: Context, *, new_pod_gpus: int, new_class: str | None, what: str,
                   beside: tuple[SurgePods, ...] | None = None) -> Skip | Charges:
    """QUOTA_EXCEEDED when a pod-template change does not fit a quota that will count its new pods; else what
    it keeps of each quota once rolled out (its `quota_charges`).

    A quota counting the old pods and the new ones needs the growth of all replicas plus the surge pods
    (they run the new template while every old pod still counts, so even a shrink needs `surge × new`). A
    quota the pods move into (a new PriorityClass) must hold every replica; one they leave is freed as
    they roll, and a quota that never counts them does not matter. The pods of the operator's other templates that
    it starts with the change (`beside`, by default `OperatorFacts.surge_beside`: a RayService's whole new
    RayCluster, an LWS surge group's leader or workers) are charged to the quotas that count them, each by its own
    template's PriorityClass and shape, as kube-apiserver matches each pod (podMatchesScopeFunc): a quota scoped to
    the leader's class is charged the surge leaders though it never counts the changed workers. Transient, like the
    surge: nothing of them is kept.
    """
    old_class, old_gpus = ctx.workload.priority_class, pod_gpus(ctx.workload)
    if beside is None:
        beside = ctx.workload.operator.surge_beside if ctx.workload.operator is not None else ()
    charges: list[tuple[str, int]] = []
    refusals: list[Skip] = []
    for quota in ctx.bounds.quotas:
        others = sum(b.gpus for b in beside if tracks(ctx, quota, b.priority_class, b.pods))
        also = f", other templates' pods {others}" if others else ""
        if not tracks(ctx, quota, new_class):
            kept, need, how = 0, others, also
        elif tracks(ctx, quota, old_class):
            kept = max(0, ctx.replicas * (new_pod_gpus - old_gpus))
            need, how = kept + ctx.surge * new_pod_gpus + others, also
        else:
            kept = ctx.replicas * new_pod_gpus
            need, how = kept + others, f", every pod moves into its scope{also}"
        blocked = _refuse(ctx, quota, need=need, what=what, how=how)
        if blocked is not None:
            refusals.append(blocked)
        charges += [(quota.name, kept)] if kept else []
    return _refused(refusals) or tuple(charges)


def priority_beside(ctx: Context) -> tuple[SurgePods, ...] | None:
    """The other templates' pods a priority change starts: where the priority is Kueue's label and the operator
    copies labels into every template (KServe: every component rolls), `OperatorFacts.label_surge`; else None (a
    template change's own, `check_template`'s default)."""
    workload = ctx.workload
    if workload.operator is None or workload.kueue is None or not workload.kueue.label_rolls:
        return None
    return workload.operator.label_surge


def check_added_pods(ctx: Context, *, pods: int, what: str) -> Skip | Charges:
    """QUOTA_EXCEEDED when `pods` more pods of the current template do not fit a quota that counts them;
    else the GPUs they take of each such quota."""
    per_replica = ctx.workload.operator.replica_gpus if ctx.workload.operator is not None else None
    need = pods * (pod_gpus(ctx.workload) if per_replica is None else per_replica)
    charges: list[tuple[str, int]] = []
    refusals: list[Skip] = []
    for quota in ctx.bounds.quotas:
        if tracks(ctx, quota, ctx.workload.priority_class):
            blocked = _refuse(ctx, quota, need=need, what=what, how="")
            if blocked is not None:
                refusals.append(blocked)
            charges += [(quota.name, need)] if need > 0 else []
    return _refused(refusals) or tuple(charges)


def _refused(refusals: list[Skip]) -> Skip | None:
    """The quota refusal of a change, every refusing quota named. Only a change that one quota alone refuses
    carries a `shortfall` (what a rebalance may answer): with two quotas short, a donor freeing GPUs in one of them
    would give for a growth that the other still refuses — so it takes nothing (kube-apiserver admits a pod only
    when every quota whose scope matches it has room: the resourcequota admission plugin's
    controller.go `CheckRequest`)."""
    if len(refusals) <= 1:
        return refusals[0] if refusals else None
    first = refusals[0]
    detail = "; ".join(r.detail for r in refusals)
    return Skip(first.reason, f"{len(refusals)} quotas refuse: {detail}")


def _refuse(ctx: Context, quota: Quota, *, need: int, what: str, how: str) -> Skip | None:
    if need <= 0 or need <= quota.headroom:
        return None
    detail = (
        f"{what} needs {need} GPUs of quota {quota.name} (replicas {ctx.replicas}, surge {ctx.surge}{how}), "
        f"headroom {quota.headroom} (hard {quota.hard}, used {quota.used})"
    )
    return Skip(SkipReason.QUOTA_EXCEEDED, detail, shortfall=Shortfall(quota.name, need, quota.headroom))
