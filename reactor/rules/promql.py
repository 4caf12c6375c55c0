"""PromQL text for the rules: recorded series names and the expressions that build them.

Pure string building, no I/O. The recording rules turn dcgm-exporter's raw series, in
whichever label spelling the scrape produced, into clean series keyed by the workload's
`namespace`, `pod` and `container`; every alert reads only those.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Callable

WORKLOAD = ("namespace", "pod", "container")
_GPU = ("gpu", "UUID", "GPU_I_ID")  # GPU_I_ID tells MIG instances of one GPU apart
BY_GPU = ", ".join(WORKLOAD + _GPU)
BY_WORKLOAD = ", ".join(WORKLOAD)

# Recorded series, named level:metric:operations with the project as the level prefix (the
# Grafana dashboard reads the container_* ones). Per GPU: namespace, pod, container, gpu, UUID,
# GPU_I_ID; per container: namespace, pod, container.
GPU_UTILIZATION = "gpu_reactor:gpu_utilization:ratio"
GPU_FB_USED = "gpu_reactor:gpu_fb_used:ratio"
UTILIZATION = "gpu_reactor:container_gpu_utilization:ratio"
FB_USED = "gpu_reactor:container_gpu_fb_used:max_ratio"
GPUS = "gpu_reactor:container_gpus:count"
IDLE_GPUS = "gpu_reactor:container_idle_gpus:count"

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def duration(value: timedelta) -> str:
    """A Prometheus duration: `1h30m`, `45s`, `0s`."""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{seconds}s" if seconds else "")
    return text or "0s"


def selector(*, only: str | None = None, exclude: tuple[str, ...] = ()) -> str:
    """Namespace matchers for one rule variant: one overridden namespace, or the rest."""
    if only is not None:
        return f'{{namespace="{only}"}}'
    if exclude:
        return f'{{namespace!~"{"|".join(exclude)}"}}'
    return ""


def workload_series(build: Callable[[str], str]) -> str:
    """A per-GPU expression `build(matchers)`, labelled by the workload in either spelling.

    Where `exported_pod` is set the scrape renamed the exporter's labels (honor_labels:
    false) and the plain `namespace`/`pod`/`container` name the exporter, so the
    `exported_*` values are copied over them.
    """
    copied = build('exported_pod!=""')
    for label in WORKLOAD:
        copied = f'label_replace({copied}, "{label}", "$1", "exported_{label}", "(.*)")'
    plain = build('exported_pod="", pod!=""')
    return f"max by ({BY_GPU}) (\n  {copied}\n  or\n  {plain}\n)"


def gpu_utilization() -> str:
    """GR_ENGINE_ACTIVE where present; GPU_UTIL/100 otherwise, but never on MIG, where it reads 0."""
    preferred = workload_series(lambda m: f"{GR_ENGINE_ACTIVE}{{{m}}}")
    fallback = workload_series(lambda m: f'{GPU_UTIL}{{{m}, GPU_I_ID=""}} / 100')
    return f"{preferred}\nor\n{fallback}"


def gpu_fb_used() -> str:
    """Framebuffer used / total, per GPU; FB_RESERVED counts in the total where exported."""

    def ratio(m: str) -> str:
        used, free, reserved = (f"DCGM_FI_DEV_FB_{name}{{{m}}}" for name in ("USED", "FREE", "RESERVED"))
        return f"{used} / ({used} + {free} + ({reserved} or {used} * 0))"

    return workload_series(ratio)


def container_utilization() -> str:
    return f"avg by ({BY_WORKLOAD}) ({GPU_UTILIZATION})"


def container_fb_used() -> str:
    return f"max by ({BY_WORKLOAD}) ({GPU_FB_USED})"


def container_gpus() -> str:
    """Every GPU the container holds, whether or not its utilization is known."""
    return f"count by ({BY_WORKLOAD}) ({GPU_UTILIZATION} or {GPU_FB_USED})"


def container_idle_gpus(sel: str, threshold: float, window: timedelta) -> str:
    """GPUs whose own average stays below `threshold`: a 4-GPU pod busy on one wastes three."""
    return f"sum by ({BY_WORKLOAD}) (avg_over_time({GPU_UTILIZATION}{sel}[{duration(window)}]) < bool {threshold:g})"


def window_compare(series: str, sel: str, op: str, threshold: float, window: timedelta, stale_after: timedelta) -> str:
    """Window average compared with a threshold, only while the series still reports.

    The window rides out a scrape gap shorter than `stale_after`; past that the
    series counts as missing (GPUMetricsMissing), never as idle.
    """
    return (
        f"avg_over_time({series}{sel}[{duration(window)}]) {op} {threshold:g}\n"
        f"and on ({BY_WORKLOAD})\n"
        f"present_over_time({series}{sel}[{duration(stale_after)}])"
    )


def metrics_missing(sel: str, window: timedelta) -> str:
    """A container that held GPUs within `window` but has no utilization now.

    Its value is the last utilization seen, or NaN when none ever was (e.g. MIG without
    profiling metrics): NaN compares false with every threshold, so it never reads as idle.
    """
    w = duration(window)
    return (
        f"(\n  last_over_time({UTILIZATION}{sel}[{w}])\n  or\n  last_over_time({GPUS}{sel}[{w}]) * NaN\n)\n"
        f"unless on ({BY_WORKLOAD})\n{UTILIZATION}"
    )


def lookup(series: str, window: timedelta) -> str:
    """A template that prints the alerting container's latest value of `series` (empty when unknown)."""
    query = f'last_over_time({series}{{namespace="%s",pod="%s",container="%s"}}[{duration(window)}])'
    return (
        f"{{{{ with printf `{query}` $labels.namespace $labels.pod $labels.container | query }}}}"
        '{{ . | first | value | printf "%.0f" }}{{ end }}'
    )
