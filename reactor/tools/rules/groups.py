"""Values -> Prometheus rule groups (plain dicts, ready to dump as YAML).

Pure: no I/O. Each section overridden for a namespace gets its own rule variant with
a `namespace="x"` matcher, and the default variant excludes that namespace, so every
container is judged by exactly one threshold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from reactor.tools.rules import cpu, promql, signal
from reactor.tools.rules.promql import duration
from reactor.tools.rules.values import Tunables, Values

ROUTING_LABELS = {"reactor": "gpu"}
GROUP = "gpu-reactor"

# Alert name -> (values section, recorded series, comparison) for the window-average alerts.
_WINDOW_ALERTS = {
    "GPUUnderutilized": ("underutilized", promql.UTILIZATION, "<"),
    "GPUIdle": ("idle", promql.UTILIZATION, "<"),
    "GPUSaturated": ("saturated", promql.UTILIZATION, ">"),
    "GPUMemorySaturated": ("memorySaturated", promql.FB_USED, ">"),
}
_SUMMARY = {
    "GPUUnderutilized": "GPUs of {{ $labels.namespace }}/{{ $labels.pod }} are underutilized",
    "GPUIdle": "GPUs of {{ $labels.namespace }}/{{ $labels.pod }} are idle",
    "GPUSaturated": "GPUs of {{ $labels.namespace }}/{{ $labels.pod }} are saturated",
    "GPUMemorySaturated": "GPU memory of {{ $labels.namespace }}/{{ $labels.pod }} is nearly full",
    "GPUMetricsMissing": "GPU metrics of {{ $labels.namespace }}/{{ $labels.pod }} are missing",
    "GPUStarvedByCPU": "GPUs of {{ $labels.namespace }}/{{ $labels.pod }} wait for its CPU",
    "GPUContainerNearMemoryLimit": "{{ $labels.namespace }}/{{ $labels.pod }} is near its memory limit",
}
# The shrink alerts say how throttled the container's CPU is: the reactor never shrinks a CPU-starved one.
_CPU_ANNOTATED = frozenset({"GPUUnderutilized", "GPUIdle"})
_WHAT = {
    "GPUUnderutilized": "averaged {{ $value | humanizePercentage }} GPU utilization over {window}, below {threshold}",
    "GPUIdle": "averaged {{ $value | humanizePercentage }} GPU utilization over {window}, below {threshold}: idle",
    "GPUSaturated": "averaged {{ $value | humanizePercentage }} GPU utilization over {window}, above {threshold}",
    "GPUMemorySaturated": ("used {{ $value | humanizePercentage }} of GPU memory on average over {window}, "
                           "above {threshold}"),
}


@dataclass(frozen=True, slots=True)
class Variant:
    """One rule variant: its namespace matcher, its tunables, and the label that tells it apart.

    The label (`thresholds: namespaces.<ns>`, the values key it came from) keeps two
    rules of one name from having the same labels, which promtool rejects as duplicates.
    """

    selector: str
    tunables: Tunables
    labels: dict[str, str]


def variants(values: Values, section: str) -> Iterator[Variant]:
    """The default rule, then one per namespace that overrides `section`."""
    overridden = values.namespaces_overriding(section)
    yield Variant(promql.selector(exclude=overridden), values.defaults[section], {})
    for ns in overridden:
        yield Variant(promql.selector(only=ns), values.overrides[ns][section], {"thresholds": f"namespaces.{ns}"})


def recording_rules(values: Values) -> list[dict[str, Any]]:
    scrape = promql.Scrape(values.scrape_labels, values.exporter_container, values.exporter_job,
                           values.exporter_namespace)
    per_gpu, container = signal.recording_rules(values.signal, dict(values.signal_overrides), scrape)
    busy = signal.per_gpu(signal.global_gpu_signal(values.signal), scrape)
    rules = [
        {"record": promql.GPU_HOLDER, "expr": promql.gpu_holder(scrape)},
        {"record": promql.GPU_PODS, "expr": promql.gpu_pods()},
        {"record": promql.SHARED, "expr": promql.container_shared()},
        {"record": promql.GPU_UTILIZATION, "expr": busy},
        {"record": promql.GPU_FB_USED, "expr": promql.gpu_fb_used(scrape)},
        *per_gpu,
        *container,
        {"record": promql.FB_USED, "expr": promql.container_fb_used()},
        {"record": promql.GPUS, "expr": promql.container_gpus()},
        {"record": promql.GPU_REPORTED, "expr": promql.gpu_reported(scrape)},
        {"record": promql.GPU_SEEN, "expr": promql.container_gpu_seen()},
    ]
    for v in variants(values, "idleGpu"):
        expr = promql.container_idle_gpus(v.selector, v.tunables.threshold, v.tunables.window)
        rule = {"record": promql.IDLE_GPUS, "expr": expr}
        rules.append({**rule, "labels": v.labels} if v.labels else rule)
    return rules + cpu.recording_rules(values)


def _annotations(
    values: Values, alert: str, description: str, *, gpus_window: timedelta, idle_known: bool
) -> dict[str, str]:
    annotations = {
        "value": '{{ printf "%.3f" $value }}',
        "gpus": promql.lookup(promql.GPUS, gpus_window),
    }
    if idle_known:
        annotations["idle_gpus"] = promql.lookup(promql.IDLE_GPUS, values.stale_after)
    annotations["summary"] = _SUMMARY[alert]
    annotations["description"] = description
    annotations["runbook_url"] = f"{values.runbook_url}#{alert.lower()}"
    return annotations


def _alert(alert: str, expr: str, v: Variant, annotations: dict[str, str]) -> dict[str, Any]:
    t = v.tunables
    rule: dict[str, Any] = {"alert": alert, "expr": expr, "for": duration(t.for_)}
    if t.keep_firing_for > timedelta(0):
        rule["keep_firing_for"] = duration(t.keep_firing_for)
    rule["labels"] = {"severity": t.severity, **ROUTING_LABELS, **v.labels}
    rule["annotations"] = annotations
    return rule


def _window_alert(values: Values, alert: str, v: Variant) -> dict[str, Any]:
    section, series, op = _WINDOW_ALERTS[alert]
    t = v.tunables
    expr = promql.window_compare(series, v.selector, op, t.threshold, t.window, values.stale_after)
    what = _WHAT[alert].replace("{window}", duration(t.window)).replace("{threshold}", f"{t.threshold * 100:g}%")
    description = (
        "Container {{ $labels.container }} of {{ $labels.namespace }}/{{ $labels.pod }} "
        f"{what}; value is the {'framebuffer used' if section == 'memorySaturated' else 'utilization'} ratio."
    )
    annotations = _annotations(values, alert, description, gpus_window=values.stale_after, idle_known=True)
    if alert in _CPU_ANNOTATED:
        annotations[cpu.ANNOTATION] = cpu.throttling_annotation(values)
    return _alert(alert, expr, v, annotations)


def _starved_alerts(values: Values) -> list[dict[str, Any]]:
    """GPUStarvedByCPU: the underutilized condition, while the CPU is throttled (see `cpu`)."""
    rules = []
    for sel, gpu_threshold, t, labels in cpu.starved_variants(values):
        expr = cpu.starved_expr(sel, gpu_threshold, t.threshold, t.window, values)
        description = cpu.starved_description(gpu_threshold, t.threshold, t.window)
        annotations = _annotations(values, cpu.STARVED, description, gpus_window=values.stale_after, idle_known=True)
        annotations[cpu.ANNOTATION] = cpu.throttling_annotation(values)
        rules.append(_alert(cpu.STARVED, expr, Variant(sel, t, labels), annotations))
    return rules


def _near_memory_alert(values: Values, v: Variant) -> dict[str, Any]:
    """GPUContainerNearMemoryLimit: the memory working set near the limit (see `cpu`)."""
    t = v.tunables
    expr = cpu.near_memory_expr(v.selector, t.threshold, t.window, values)
    description = cpu.near_memory_description(t.threshold, t.window)
    annotations = _annotations(values, cpu.NEAR_MEMORY_LIMIT, description, gpus_window=values.stale_after,
                               idle_known=True)
    return _alert(cpu.NEAR_MEMORY_LIMIT, expr, v, annotations)


def _missing_alert(values: Values, v: Variant) -> dict[str, Any]:
    t = v.tunables
    dropped = ", its series dropped while the pod exists" if values.kube_state_metrics else ""
    description = (
        "No GPU utilization for container {{ $labels.container }} of {{ $labels.namespace }}/{{ $labels.pod }}, "
        f"whose GPUs are not being measured (exporter down or not scraped, GPU lost{dropped}, or MIG without "
        f"profiling metrics); value is the last utilization seen within {duration(t.window)}, NaN if none. "
        "Hold: a missing metric is never idle."
    )
    expr = promql.metrics_missing(v.selector, t.window, kube_state_metrics=values.kube_state_metrics)
    annotations = _annotations(values, "GPUMetricsMissing", description, gpus_window=t.window, idle_known=False)
    return _alert("GPUMetricsMissing", expr, v, annotations)


def alerting_rules(values: Values) -> list[dict[str, Any]]:
    rules = []
    for alert, (section, _, _) in _WINDOW_ALERTS.items():
        rules += [_window_alert(values, alert, v) for v in variants(values, section)]
    rules += [_missing_alert(values, v) for v in variants(values, "metricsMissing")]
    rules += _starved_alerts(values)
    return rules + [_near_memory_alert(values, v) for v in variants(values, "nearMemoryLimit")]


def rule_groups(values: Values) -> dict[str, Any]:
    """The whole rule file as a dict.

    One group: rules in a group run in order, so each alert reads the series recorded in
    the same evaluation. Separate groups run at independent offsets (and in random order
    under `promtool test rules`), which would make every `for` drift by an interval.
    """
    rules = recording_rules(values) + alerting_rules(values)
    return {"groups": [{"name": GROUP, "interval": duration(values.evaluation_interval), "rules": rules}]}
