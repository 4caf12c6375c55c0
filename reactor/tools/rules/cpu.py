"""The CPU half of the rules: per GPU container, its CPU throttling and its CPU use against its limit,
and GPUStarvedByCPU (GPUs underused while the CPU is throttled); its memory working set against its memory
limit, and GPUContainerNearMemoryLimit.

Pure string and dict building, no I/O. cAdvisor (the kubelet) labels its series with the container's
`namespace`, `pod`, `container`; `scrape.cadvisorLabels: exported` reads `exported_*` instead (a
federation or a scrape that kept its own target labels). Only containers that hold GPUs are recorded,
so the series count follows GPU containers, not every container of the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from reactor.tools.rules import promql
from reactor.tools.rules.promql import BY_WORKLOAD, WORKLOAD, duration
from reactor.tools.rules.values import Tunables, Values

THROTTLING = "gpu_reactor:container_cpu_throttling:ratio"
CPU_LIMIT_USED = "gpu_reactor:container_cpu_usage:limit_ratio"
MEMORY_LIMIT_USED = "gpu_reactor:container_memory_working_set:limit_ratio"
STARVED = "GPUStarvedByCPU"
NEAR_MEMORY_LIMIT = "GPUContainerNearMemoryLimit"
ANNOTATION = "cpu_throttling"
_REAL_CONTAINER = 'container!="", container!="POD"'  # "" is the pod's cgroup, "POD" the pause container


def cadvisor(metric: str, labels: str) -> str:
    """A cAdvisor series of real containers, labelled by the workload in the configured spelling."""
    if labels == "plain":
        return f"{metric}{{{_REAL_CONTAINER}, pod!=\"\"}}"
    series = f'{metric}{{exported_container!="", exported_container!="POD", exported_pod!=""}}'
    for label in WORKLOAD:
        series = f'label_replace({series}, "{label}", "$1", "exported_{label}", "(.*)")'
    return series


def _rate(metric: str, values: Values) -> str:
    window = duration(values.defaults["cpuThrottling"].window)
    return f"sum by ({BY_WORKLOAD}) (rate({cadvisor(metric, values.cadvisor_labels)}[{window}]))"


def throttling(values: Values) -> str:
    """Share of CFS periods in which the container was throttled, over `cpuThrottling.window`.

    A container with no CFS period at all (no CPU limit, or never runnable) was not throttled: 0, not
    NaN (the denominator is clamped). A container without cAdvisor series gets no sample: unknown.
    """
    throttled = _rate("container_cpu_cfs_throttled_periods_total", values)
    periods = _rate("container_cpu_cfs_periods_total", values)
    return f"{throttled}\n/\nclamp_min({periods}, 1e-9)\nand on ({BY_WORKLOAD})\n{promql.GPUS}"


def limit_used(values: Values) -> str:
    """CPU used / CPU limit (cores = quota / period); containers without a limit get no sample."""
    used = _rate("container_cpu_usage_seconds_total", values)
    labels = values.cadvisor_labels
    cores = (f"sum by ({BY_WORKLOAD}) ({cadvisor('container_spec_cpu_quota', labels)} > 0)\n/\n"
             f"sum by ({BY_WORKLOAD}) ({cadvisor('container_spec_cpu_period', labels)} > 0)")
    return f"{used}\n/\n(\n{cores}\n)\nand on ({BY_WORKLOAD})\n{promql.GPUS}"


def memory_limit_used(values: Values) -> str:
    """Memory working set / memory limit, both from cAdvisor (the kubelet), like the CPU series: the working
    set is what the kernel's OOM killer weighs against the limit (`container_memory_working_set_bytes`), the
    limit is `container_spec_memory_limit_bytes`, 0 for a container without one: no sample then (nothing to
    near), and none at all without cAdvisor series (unknown, never "far from its limit")."""
    labels = values.cadvisor_labels
    used = f"sum by ({BY_WORKLOAD}) ({cadvisor('container_memory_working_set_bytes', labels)})"
    limit = f"sum by ({BY_WORKLOAD}) ({cadvisor('container_spec_memory_limit_bytes', labels)} > 0)"
    return f"{used}\n/\n{limit}\nand on ({BY_WORKLOAD})\n{promql.GPUS}"


def recording_rules(values: Values) -> list[dict[str, Any]]:
    """Recorded after the GPU series: they keep only containers `container_gpus:count` lists."""
    return [{"record": THROTTLING, "expr": throttling(values)}, {"record": CPU_LIMIT_USED, "expr": limit_used(values)},
            {"record": MEMORY_LIMIT_USED, "expr": memory_limit_used(values)}]


def near_memory_expr(sel: str, threshold: float, window: timedelta, values: Values) -> str:
    """Working set above `threshold` of the limit on average over `window`, while cAdvisor still reports it
    (a series silent for `staleAfter` is not judged: missing is never read either way)."""
    return promql.window_compare(MEMORY_LIMIT_USED, sel, ">", threshold, window, values.stale_after)


def near_memory_description(threshold: float, window: timedelta) -> str:
    return (
        "Container {{ $labels.container }} of {{ $labels.namespace }}/{{ $labels.pod }} used "
        f"{{{{ $value | humanizePercentage }}}} of its memory limit on average over {duration(window)}, above "
        f"{threshold * 100:g}%: near an OOM kill, which would lose its work and idle its GPUs; value is the "
        "working set / limit ratio. Give it memory."
    )


def throttling_annotation(values: Values) -> str:
    """The container's latest throttling ratio, or `unknown` when cAdvisor reports nothing for it."""
    query = (f'last_over_time({THROTTLING}{{namespace="%s",pod="%s",container="%s"}}'
             f"[{duration(values.stale_after)}])")
    return (f"{{{{ with printf `{query}` $labels.namespace $labels.pod $labels.container | query }}}}"
            '{{ . | first | value | printf "%.3f" }}{{ else }}unknown{{ end }}')


def starved_variants(values: Values) -> Iterator[tuple[str, float, Tunables, dict[str, str]]]:
    """(selector, GPU threshold, starvedByCpu tunables, labels): the default rule, then one per namespace
    overriding `starvedByCpu` or `underutilized` (the GPU side of the condition is the latter's)."""
    overridden = tuple(sorted(set(values.namespaces_overriding("starvedByCpu"))
                              | set(values.namespaces_overriding("underutilized"))))
    d = values.defaults
    yield promql.selector(exclude=overridden), d["underutilized"].threshold, d["starvedByCpu"], {}
    for ns in overridden:
        own = values.overrides[ns]
        yield (promql.selector(only=ns), own.get("underutilized", d["underutilized"]).threshold,
               own.get("starvedByCpu", d["starvedByCpu"]), {"thresholds": f"namespaces.{ns}"})


def starved_expr(sel: str, gpu_threshold: float, cpu_threshold: float, window: timedelta, values: Values) -> str:
    """GPU busy below `gpu_threshold` while throttled above `cpu_threshold`, both averaged over `window`.

    Missing cAdvisor series never fire it (nothing known), nor a GPU series gone stale.
    """
    w = duration(window)
    gpu = promql.window_compare(promql.UTILIZATION, sel, "<", gpu_threshold, window, values.stale_after)
    return f"{gpu}\nand on ({BY_WORKLOAD})\navg_over_time({THROTTLING}{sel}[{w}]) > {cpu_threshold:g}"


def starved_description(gpu_threshold: float, cpu_threshold: float, window: timedelta) -> str:
    return (
        "Container {{ $labels.container }} of {{ $labels.namespace }}/{{ $labels.pod }} averaged "
        f"{{{{ $value | humanizePercentage }}}} GPU utilization over {duration(window)}, "
        f"below {gpu_threshold * 100:g}%, while its CPU was throttled in more than {cpu_threshold * 100:g}% "
        "of its CFS periods: its GPUs wait for "
        "its CPU; value is the utilization ratio. Give it CPU, not fewer GPUs."
    )
