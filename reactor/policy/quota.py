"""ResourceQuota headroom for a change, counting the rolling-update surge.

Quota is enforced when pods are created, not when the owner is patched: a patch that does not
fit succeeds and its new pods then fail with FailedCreate. So the policy checks the need itself.
"""

from __future__ import annotations

from ..model import Skip, SkipReason, Workload
from .context import Context


def pod_gpus(workload: Workload, *, container: str | None = None, gpus: int | None = None) -> int:
    """GPUs one pod requests, optionally with `container` set to `gpus`."""
    return sum(gpus if (c.name == container and gpus is not None) else c.gpus for c in workload.containers)


def template_need(ctx: Context, *, new_pod_gpus: int) -> int:
    """GPUs of quota a pod-template change needs: the growth of all replicas plus the surge pods.

    The surge pods run the new template while every old pod still counts, so even a shrink
    needs `surge × new` free GPUs until the rollout finishes.
    """
    old = pod_gpus(ctx.workload)
    return max(0, ctx.replicas * (new_pod_gpus - old)) + ctx.surge * new_pod_gpus


def check_quota(ctx: Context, *, need: int, what: str) -> Skip | None:
    """QUOTA_EXCEEDED when the namespace's tightest GPU quota has less headroom than `need`."""
    headroom = ctx.bounds.headroom
    if headroom is None or need <= headroom:
        return None
    detail = (
        f"{what} needs {need} GPUs of quota (replicas {ctx.replicas}, surge {ctx.surge}), "
        f"headroom {headroom} (hard {ctx.bounds.quota_hard}, used {ctx.bounds.quota_used})"
    )
    return Skip(SkipReason.QUOTA_EXCEEDED, detail)
