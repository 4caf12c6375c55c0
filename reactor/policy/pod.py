"""LimitRange `type: Pod` items: the pod's totals as LimitRanger sums them, and what they leave one container.

Why this exists: LimitRanger (kube-apiserver, plugin/pkg/admission/limitranger/admission.go, PodValidateLimitFunc
with podRequests / podLimits) refuses a pod whose summed requests or limits break a Pod item's min, max or
maxLimitRequestRatio. A template change past one stalls its rollout (every new pod is refused: an outage under
Recreate) until the verifier reverts it; an in-place resize past one is a 403 after the decision was made. A
per-container bound cannot see it: 2 CPUs more on one container is fine alone and over the pod's max beside its
sidecar. So every GPU, CPU and memory value is checked against the pod's new totals before it is written.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from reactor.core.model import ComputeBounds, ComputeResources, Container, Skip, SkipReason
from reactor.policy.context import Context


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _most(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def parts(values: Iterable[int | None], inits: Iterable[tuple[int | None, bool]]) -> tuple[int | None, int | None]:
    """(sum, floor) of one resource, as podRequests / podLimits build the pod's total `max(sum, floor)`.

    The sum: every container's value, and every sidecar's (an init container with restartPolicy Always runs
    beside them). The floor: each other init container runs alone with the sidecars started before it, so the
    pod needs at least its value plus theirs. None: no container sets the resource (LimitRanger then finds no
    request or limit at all).
    """
    summed: int | None = None
    for value in values:
        summed = _plus(summed, value)
    sidecars: int | None = None
    floor: int | None = None
    for value, sidecar in inits:
        if sidecar:
            summed, sidecars = _plus(summed, value), _plus(sidecars, value)
            floor = _most(floor, sidecars)
        else:
            floor = _most(floor, _plus(value, sidecars))
    return summed, floor


def total(values: Iterable[int | None], inits: Iterable[tuple[int | None, bool]]) -> int | None:
    """The pod's total of one resource (podRequests / podLimits)."""
    summed, floor = parts(values, inits)
    return _most(summed, floor)


def compute_total(values: Iterable[ComputeResources | None],
                  inits: Iterable[tuple[ComputeResources | None, bool]]) -> ComputeResources:
    """One pod's whole request and limit of a compute resource, from its containers' (`values`) and its init
    containers' (`inits`: value, sidecar).

    The one place a pod's CPU or memory total is made, because three checks must agree on it: LimitRanger's Pod
    items (`compute_out_of_bounds`), ResourceQuota's charge for a new pod (kube-apiserver pkg/quota/v1/evaluator/
    core/pods.go PodUsageFunc → resourcehelper.PodRequests / PodLimits: cluster/workloads.py `pod_usage`) and the
    surge pod a template change creates (policy/cpu.py `surge_pod`). A limit without a request is the request too:
    the API server defaults it so (SetDefaults_Pod) before either admission plugin runs. None where no container
    sets it.
    """
    values, inits = list(values), list(inits)
    return ComputeResources(request=total([request_of(v) for v in values], [(request_of(v), s) for v, s in inits]),
                            limit=total([limit_of(v) for v in values], [(limit_of(v), s) for v, s in inits]))


def gpu_range(ctx: Context, container: str, lo: int, hi: int) -> tuple[int, int]:
    """(lo, hi) for `container`'s GPUs, narrowed so that the pod's GPU total stays inside the Pod items.

    With the other containers' GPUs S (and sidecars') and the init containers' floor F, the pod holds
    max(S + n, F): it fits the max M while S + n <= M (and never when F > M: nothing fits, lo > hi), and the
    min m once S + n >= m (always when F >= m).
    """
    bounds = ctx.bounds
    if bounds.pod_min_gpus is None and bounds.pod_max_gpus is None:
        return lo, hi
    others = [c.gpus or None for c in ctx.workload.containers if c.name != container]
    summed, floor = parts(others, [(c.gpus or None, c.sidecar) for c in ctx.workload.init_containers])
    rest, least = summed or 0, floor or 0
    if bounds.pod_max_gpus is not None:
        hi = min(hi, bounds.pod_max_gpus - rest) if least <= bounds.pod_max_gpus else lo - 1
    if bounds.pod_min_gpus is not None and least < bounds.pod_min_gpus:
        lo = max(lo, bounds.pod_min_gpus - rest)
    return lo, hi


def request_of(resources: ComputeResources | None) -> int | None:
    """The request as the API server stores it: a limit without a request defaults the request to it."""
    if resources is None:
        return None
    return resources.request if resources.request is not None else resources.limit


def limit_of(resources: ComputeResources | None) -> int | None:
    return None if resources is None else resources.limit


def _of(container: Container, resource: str) -> ComputeResources | None:
    return container.cpu if resource == "cpu" else container.memory


def _current(ctx: Context, resource: str) -> Callable[[str], ComputeResources | None]:
    """Each container's CPU or memory as the change will find it (the running pod's in place)."""
    return ctx.container_compute if resource == "cpu" else ctx.container_memory


def _parts(ctx: Context, resource: str, values: list[ComputeResources | None],
           read: Callable[[ComputeResources | None], int | None]) -> tuple[int | None, int | None]:
    inits = [(read(_of(c, resource)), c.sidecar) for c in ctx.workload.init_containers]
    return parts([read(v) for v in values], inits)


def limit_room(ctx: Context, bounds: ComputeBounds, resource: str, container: str) -> int | None:
    """The highest limit `container` may have under the Pod max (None: no Pod max): the max less what the other
    containers and the sidecars hold; 0 when the init containers alone pass it."""
    if bounds.pod_highest is None:
        return None
    current = _current(ctx, resource)
    others = [current(c.name) for c in ctx.workload.containers if c.name != container]
    summed, floor = _parts(ctx, resource, others, limit_of)
    if (floor or 0) > bounds.pod_highest:
        return 0
    return bounds.pod_highest - (summed or 0)


def compute_out_of_bounds(ctx: Context, bounds: ComputeBounds, resource: str, container: str,
                          new: ComputeResources, *, what: str, unit: str, at_max: SkipReason) -> Skip | None:
    """A Skip naming the Pod item that `container` at `new` would break (maxConstraint, minConstraint,
    limitRequestRatioConstraint on the pod's totals), or None."""
    high, low, ratio = bounds.pod_highest, bounds.pod_lowest, bounds.pod_max_ratio
    if high is None and low is None and ratio is None:
        return None
    current = _current(ctx, resource)
    values = [new if c.name == container else current(c.name) for c in ctx.workload.containers]
    totals = compute_total(values, [(_of(c, resource), c.sidecar) for c in ctx.workload.init_containers])
    requests, limits = totals.request, totals.limit
    if high is not None and ((limits is not None and limits > high) or (requests is not None and requests > high)):
        return Skip(at_max, f"{what}: the pod would total {limits}{unit} (limits) / {requests}{unit} (requests), "
                    f"above the LimitRange's Pod max {high}{unit}")
    if low is not None and ((requests is not None and requests < low) or (limits is not None and limits < low)):
        return Skip(SkipReason.NOTHING_TO_REVERT, f"{what}: the pod would request {requests}{unit} in all, below "
                    f"the LimitRange's Pod min {low}{unit}")
    if ratio is not None and requests and limits and limits / requests > ratio:
        return Skip(SkipReason.NOT_APPLICABLE, f"{what}: the pod's limits / requests would be "
                    f"{limits / requests:.3g}, above the LimitRange's Pod maxLimitRequestRatio {ratio:g}")
    return None
