"""PromQL text for the rules: recorded series names and the expressions that build them.

Pure string building, no I/O. The recording rules turn dcgm-exporter's raw series, in the
label spelling the scrape produces (values `scrape.labels`), into clean series keyed by the
workload's `namespace`, `pod` and `container`; every alert reads only those (GPUMetricsMissing
also `kube_pod_info`, where enabled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

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
# Freshness, for GPUMetricsMissing: per GPU (UUID) and per container and GPU, the last evaluation
# time it was reported. A pod that ends leaves its GPU reported (free, or by the next pod); an
# exporter that stops reporting takes the GPU's series with it.
GPU_REPORTED = "gpu_reactor:gpu_reported:timestamp"
# Sharing: under time-slicing or MPS dcgm-exporter reports the whole GPU's values for every pod on it (an
# NVML limitation), so a GPU reported for several pods is never read as one pod's utilization. Per GPU
# (UUID; GPU_I_ID tells MIG instances apart, which are not shared): the pods holding it, how many; per
# container: how many pods share its most shared GPU.
GPU_HOLDER = "gpu_reactor:gpu_holder:info"
GPU_PODS = "gpu_reactor:gpu_pods:count"
SHARED = "gpu_reactor:container_gpu_shared:pods"
_SHARING = "UUID, GPU_I_ID"
GPU_SEEN = "gpu_reactor:container_gpu_seen:timestamp"

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED_RAW = "DCGM_FI_DEV_FB_USED"
POD_INFO = "kube_pod_info"


@dataclass(frozen=True, slots=True)
class Scrape:
    """How dcgm-exporter's series reach Prometheus, as the raw selectors must read them.

    `labels`: the spelling of the workload's labels (values.Values.scrape_labels). `exporter_container`: the
    exporter's own container (plain spelling: never a workload). `job`, `namespace`: regexes of the exporter's
    own scrape targets' `job` and `namespace` target labels ("" = not checked). Every raw DCGM selector carries
    them: any pod can expose series named DCGM_FI_* with `exported_pod` naming anyone, and only the target
    labels Prometheus sets tell the exporter's from a tenant's.
    """

    labels: str = "exported"
    exporter_container: str = "nvidia-dcgm-exporter|dcgm-exporter|exporter"
    job: str = ""
    namespace: str = ""

    @property
    def targets(self) -> str:
        """The matchers that keep only the exporter's own targets' series ("" when nothing is checked)."""
        found = [f'job=~"{self.job}"'] if self.job else []
        return ", ".join(found + ([f'namespace=~"{self.namespace}"'] if self.namespace else []))

    def matchers(self, *more: str) -> str:
        """`more`, then the target matchers, comma-separated (the inside of a selector's braces)."""
        return ", ".join(m for m in (*more, self.targets) if m)


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


def workload_series(build: Callable[[str], str], scrape: Scrape) -> str:
    """A per-GPU expression `build(matchers)`, labelled by the workload in the scrape's spelling.

    "exported" (honor_labels false): the plain `namespace`/`pod`/`container` name the exporter
    and the `exported_*` ones the workload, so those are copied over them; a series without
    `exported_pod` is a GPU no pod holds, whatever its plain labels say. "plain" (honor_labels
    true): the plain labels name the workload, but a free GPU's series may carry the exporter's
    own target labels, so a container matching `exporter_container` is never a workload. Either
    way only the exporter's own targets count (`Scrape.targets`): the matchers apply to the raw
    series, before the `exported_*` labels are copied over the target's.
    """
    if scrape.labels == "exported":
        series = build(scrape.matchers('exported_pod!=""'))
        for label in WORKLOAD:
            series = f'label_replace({series}, "{label}", "$1", "exported_{label}", "(.*)")'
    else:
        series = build(scrape.matchers(f'pod!="", container!="", container!~"{scrape.exporter_container}"'))
    return f"max by ({BY_GPU}) (\n  {series}\n)"


def gpu_holder(scrape: Scrape) -> str:
    """1 per container and GPU it is reported on, whatever the GPU's values."""
    return workload_series(
        lambda m: f"{GPU_UTIL}{{{m}}} or {FB_USED_RAW}{{{m}}} or {GR_ENGINE_ACTIVE}{{{m}}}", scrape,
    ).replace("max by", "group by", 1)


def gpu_pods() -> str:
    return f"count by ({_SHARING}) (group by (namespace, pod, {_SHARING}) ({GPU_HOLDER}))"


def container_shared() -> str:
    """Containers on a GPU reported for more than one pod; the value is how many pods share it."""
    return f"max by ({BY_WORKLOAD}) (\n  {GPU_HOLDER} * on ({_SHARING}) group_left () ({GPU_PODS} > 1)\n)"


def unshared(expr: str) -> str:
    """Only the GPUs one pod holds alone."""
    return f"(\n{_indent(expr)}\n)\nunless on ({_SHARING})\n({GPU_PODS} > 1)"


def gpu_utilization(scrape: Scrape) -> str:
    """GR_ENGINE_ACTIVE where present; GPU_UTIL/100 otherwise, but never on MIG, where it reads 0."""
    preferred = workload_series(lambda m: f"{GR_ENGINE_ACTIVE}{{{m}}}", scrape)
    fallback = workload_series(lambda m: f'{GPU_UTIL}{{{m}, GPU_I_ID=""}} / 100', scrape)
    return unshared(f"{preferred}\nor\n{fallback}")


def gpu_fb_used(scrape: Scrape) -> str:
    """Framebuffer used / total, per GPU; FB_RESERVED counts in the total where exported."""

    def ratio(m: str) -> str:
        used, free, reserved = (f"DCGM_FI_DEV_FB_{name}{{{m}}}" for name in ("USED", "FREE", "RESERVED"))
        return f"{used} / ({used} + {free} + ({reserved} or {used} * 0))"

    return unshared(workload_series(ratio, scrape))


def gpu_reported(scrape: Scrape) -> str:
    """Per GPU (`UUID`), the evaluation time whenever the exporter reports it at all, held or free.

    Read in any spelling: a GPU is reported as long as any series the rules read carries its UUID
    (from the exporter's own targets: a tenant's series must not keep a GPU "reported").
    """
    sel = f"{{{scrape.targets}}}" if scrape.targets else ""
    return f"time() * group by (UUID) ({FB_USED_RAW}{sel} or {GPU_UTIL}{sel} or {GR_ENGINE_ACTIVE}{sel})"


def container_gpu_seen() -> str:
    """Per container and GPU (`UUID`) it holds, the evaluation time whenever it is reported on it."""
    return f"time() * group by ({BY_WORKLOAD}, UUID) ({GPU_UTILIZATION} or {GPU_FB_USED})"


def container_fb_used() -> str:
    return f"max by ({BY_WORKLOAD}) ({GPU_FB_USED}) unless on ({BY_WORKLOAD}) {SHARED}"


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


def metrics_missing(sel: str, window: timedelta, *, kube_state_metrics: bool = False) -> str:
    """A container seen within `window` that reports no utilization now, and

    - still holds GPUs (MIG without profiling metrics: its GPUs report, but no utilization), or
    - it is on a GPU reported for several pods (time-slicing, MPS): its values are the whole GPU's, or
    - a GPU it held stopped being reported at all while it held it (exporter down or not
      scraped, GPU lost): the GPU was last reported no later than the container was last seen
      on it. Not when the GPU was reported after the pod left it (free, or by the next pod):
      the pod ended (a rollout, a Job), or the exporter lost its pod mapping, which reads the
      same in the exporter's series.

    With `kube_state_metrics`, while kube-state-metrics reports any pod: exactly the pods that
    still exist in `kube_pod_info`, so one whose series were dropped alerts too, and a deleted
    pod never does, whatever its node did afterwards.

    A container that reports utilization on some of its GPUs is measured (it averages those).
    The value is the last utilization seen, or NaN when none ever was (e.g. MIG without
    profiling metrics): NaN compares false with every threshold, so it never reads as idle.
    """
    w = duration(window)
    silent = (
        f"(\n  last_over_time({UTILIZATION}{sel}[{w}])\n  or\n  last_over_time({GPUS}{sel}[{w}]) * NaN\n)\n"
        f"unless on ({BY_WORKLOAD})\n{UTILIZATION}"
    )
    unmeasured = (
        f"{silent}\nand on ({BY_WORKLOAD})\n(\n  {GPUS}\n  or\n  count by ({BY_WORKLOAD}) (\n"
        f"    (last_over_time({GPU_SEEN}[{w}]) unless {GPU_SEEN})\n    >= on (UUID) group_left ()\n"
        f"    last_over_time({GPU_REPORTED}[{w}])\n  )\n)"
    )
    # A container on a shared GPU is not measured either: its value is unknown (NaN).
    shared = f"{SHARED}{sel} * NaN"
    if not kube_state_metrics:
        return f"{unmeasured}\nor\n{shared}"
    return (
        f"(\n{_indent(silent)}\n  and on (namespace, pod)\n  group by (namespace, pod) ({POD_INFO})\n)\nor\n"
        f"(\n{_indent(unmeasured)}\n  unless on ()\n  group ({POD_INFO})\n)\nor\n{shared}"
    )


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def lookup(series: str, window: timedelta) -> str:
    """A template that prints the alerting container's latest value of `series` (empty when unknown)."""
    query = f'last_over_time({series}{{namespace="%s",pod="%s",container="%s"}}[{duration(window)}])'
    return (
        f"{{{{ with printf `{query}` $labels.namespace $labels.pod $labels.container | query }}}}"
        '{{ . | first | value | printf "%.0f" }}{{ end }}'
    )
