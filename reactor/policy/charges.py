"""What the new pods of a GPU or priority change take of every quota line that counts them: the GPU lines
(policy/quota.py), and beside them the CPU, memory and pod-count lines.

Why the lines beside the GPU's: quota is enforced when a pod is created, never when its owner is patched.
kube-apiserver's ResourceQuota admission charges each new pod (pkg/quota/v1/evaluator/core/pods.go PodUsageFunc) 1 on
`pods` and `count/pods`, its whole requests on `cpu` / `requests.cpu` and `memory` / `requests.memory` and its whole
limits on `limits.cpu` / `limits.memory` (podComputeUsageHelper over resourcehelper.PodRequests / PodLimits), to
every quota whose scope matches the pod (podMatchesScopeFunc), and admits it only when every one has room. A replica
more that fits the GPU line but not a full `requests.cpu` line is patched all the same, and its pod then fails
FailedCreate for as long as the quota stays full. So these lines are checked with the arithmetic of the GPU's:
scopes by `tracks`, surge pods charged whole (`cpu.surge_pod`, as a CPU raise's are) while every old pod still
counts, pods moving into a quota's scope (a new PriorityClass) charged every replica, and only what lasts kept for
the notification's later decisions (`Action.compute_quota_charges`, as engine/namespace.py reserves them).

Pure: no I/O, no clock. The CPU (memory) lines are read only where some quota of the namespace has one
(`Bounds.compute_lines`): a namespace without them costs no read more than the GPU check did.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.core.model import ComputeQuota, Skip, SkipReason, SurgePods
from reactor.policy.context import Context
from reactor.policy.cpu import CpuCharges, pod_line, surge_pod
from reactor.policy.quota import Charges, check_added_pods, check_template, tracks

UNITS = {"cpu": "m", "memory": "B", "pods": ""}  # how each resource's amounts read in a refusal


@dataclass(frozen=True, slots=True)
class Charged:
    """What a change that fits keeps once rolled out: GPUs by quota name (`Action.quota_charges`), and millicores,
    bytes or pods by quota line (`Action.compute_quota_charges`)."""

    gpus: Charges = ()
    lines: CpuCharges = ()


def check_template_change(ctx: Context, *, new_pod_gpus: int, new_class: str | None, what: str,
                          beside: tuple[SurgePods, ...] | None = None) -> Skip | Charged:
    """QUOTA_EXCEEDED when a pod-template change (GPUs per pod, the PriorityClass) does not fit a GPU, CPU, memory
    or pod-count line that will count its new pods; else what it keeps of each (see `check_template` for the GPU
    lines, `_template_lines` for the others)."""
    if beside is None:
        beside = ctx.workload.operator.surge_beside if ctx.workload.operator is not None else ()
    gpus = check_template(ctx, new_pod_gpus=new_pod_gpus, new_class=new_class, what=what, beside=beside)
    return _joined(gpus, _template_lines(ctx, new_class=new_class, what=what, beside=beside))


def check_added_replicas(ctx: Context, *, replicas: int, what: str) -> Skip | Charged:
    """QUOTA_EXCEEDED when `replicas` more replicas of the current template do not fit a GPU, CPU, memory or
    pod-count line that counts their pods; else what they take of each."""
    gpus = check_added_pods(ctx, pods=replicas, what=what)
    return _joined(gpus, _added_lines(ctx, replicas=replicas, what=what))


def _template_lines(ctx: Context, *, new_class: str | None, what: str,
                    beside: tuple[SurgePods, ...]) -> Skip | CpuCharges:
    """The lines beside the GPU's for a template change that leaves each pod's CPU and memory as they are.

    A quota that counts the old pods and the new ones needs the surge pods (each whole: `ctx.surge` of them run
    the new template while every old pod still counts) and keeps nothing; one the pods move into must hold every
    replica, and keeps them; one that never counts them needs nothing. The pods of the operator's other templates
    the change starts (`beside`) are charged to the lines whose scope matches them, each by its own class and shape.
    """
    old_class = ctx.workload.priority_class
    charges: list[tuple[tuple[str, str], int]] = []
    refusals: list[Skip] = []
    for quota, resource in _lines(ctx):
        unit, each = UNITS[resource], _each(ctx, quota, resource)
        others = sum(_other_pods(quota, resource, b) for b in beside if tracks(ctx, quota, b.priority_class, b.pods))
        also = f", other templates' pods {others}{unit}" if others else ""
        if not tracks(ctx, quota, new_class):
            kept, need, how = 0, others, also
        elif tracks(ctx, quota, old_class):
            kept, need, how = 0, ctx.surge * each + others, also
        else:
            kept = ctx.replicas * each
            need, how = kept + others, f", every pod moves into its scope{also}"
        pods = f"replicas {ctx.replicas}, surge {ctx.surge} of {each}{unit} each{how}"
        refused = _refuse(quota, need, unit, what, pods)
        refusals += [refused] if refused is not None else []
        charges += [(quota.key, kept)] if kept else []
    return _refused(refusals) or tuple(charges)


def _added_lines(ctx: Context, *, replicas: int, what: str) -> Skip | CpuCharges:
    """The lines beside the GPU's for `replicas` more replicas: each of their pods whole (a replica of an operator's
    template stands for `pods_per_replica` pods, and for the pods of its other templates scaled with it: an LWS
    group's leader), on every line whose scope matches them; all of it kept."""
    operator = ctx.workload.operator
    pods = replicas * (max(1, operator.pods_per_replica) if operator is not None else 1)
    beside = operator.replica_beside if operator is not None else ()
    charges: list[tuple[tuple[str, str], int]] = []
    refusals: list[Skip] = []
    for quota, resource in _lines(ctx):
        unit, each = UNITS[resource], _each(ctx, quota, resource)
        own = pods * each if tracks(ctx, quota, ctx.workload.priority_class) else 0
        others = replicas * sum(_other_pods(quota, resource, b) for b in beside
                                if tracks(ctx, quota, b.priority_class, b.pods))
        how = [f"{pods} pods more of {each}{unit} each"] if own else []
        how += [f"other templates' pods {others}{unit}"] if others else []
        refused = _refuse(quota, own + others, unit, what, ", ".join(how))
        refusals += [refused] if refused is not None else []
        charges += [(quota.key, own + others)] if own + others > 0 else []
    return _refused(refusals) or tuple(charges)


def _lines(ctx: Context) -> list[tuple[ComputeQuota, str]]:
    """Every CPU, memory and pod-count line of the namespace's quotas, with its resource. The CPU (memory) bounds
    are asked for only where a quota has such a line: they are a reader the decision calls on first use."""
    kinds = ctx.bounds.compute_lines
    found = [(q, "cpu") for q in ctx.cpu_bounds.quotas] if "cpu" in kinds else []
    found += [(q, "memory") for q in ctx.memory_bounds.quotas] if "memory" in kinds else []
    return found + [(q, "pods") for q in ctx.bounds.pod_quotas]


def _each(ctx: Context, quota: ComputeQuota, resource: str) -> int:
    """What one new pod of the template takes of `quota`'s line: 1 of a pod count, else its whole requests (limits
    on a `limits.*` line)."""
    return 1 if resource == "pods" else pod_line(surge_pod(ctx, resource), quota.resource)


def _other_pods(quota: ComputeQuota, resource: str, pods: SurgePods) -> int:
    """What an operator's other template's new pods take of `quota`'s line, each whole."""
    return pods.count if resource == "pods" else pods.count * pod_line(pods.pods.compute(resource), quota.resource)


def _refuse(quota: ComputeQuota, need: int, unit: str, what: str, how: str) -> Skip | None:
    if need <= 0 or need <= quota.headroom:
        return None
    return Skip(SkipReason.QUOTA_EXCEEDED,
                f"{what} needs {need}{unit} of {quota.resource} of quota {quota.name} ({how}), headroom "
                f"{quota.headroom}{unit} (hard {quota.hard}{unit}, used {quota.used}{unit})")


def _refused(refusals: list[Skip]) -> Skip | None:
    """One refusal naming every line that refuses (kube-apiserver would name the first quota it meets)."""
    if len(refusals) <= 1:
        return refusals[0] if refusals else None
    return Skip(SkipReason.QUOTA_EXCEEDED, f"{len(refusals)} quota lines refuse: "
                + "; ".join(r.detail for r in refusals))


def _joined(gpus: Skip | Charges, lines: Skip | CpuCharges) -> Skip | Charged:
    """Both checks' verdict. A GPU refusal keeps its `shortfall` (what a rebalance may answer) only while the other
    lines have room: a donor freeing GPUs for a growth that a CPU, memory or pod line still refuses would give for
    nothing."""
    if isinstance(gpus, Skip) and isinstance(lines, Skip):
        return Skip(SkipReason.QUOTA_EXCEEDED, f"{gpus.detail}; {lines.detail}")
    if isinstance(gpus, Skip):
        return gpus
    if isinstance(lines, Skip):
        return lines
    return Charged(gpus, lines)
