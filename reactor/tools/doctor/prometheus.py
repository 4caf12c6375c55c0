"""Doctor checks that ask Prometheus: GPU metrics scraped, their label spelling, the rules, shared GPUs.

Reads only (instant queries and /api/v1/rules). Each function returns `Check`s; none raises for a
finding, only `Unreachable` when Prometheus does not answer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from reactor.core.model import KNOWN_ALERTS
from reactor.tools.doctor.http import get_json, prometheus_query
from reactor.tools.doctor.report import Check, failing, ok, warning

UTIL_NAMES = '__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE"'
ALERTS = ("GPUUnderutilized", "GPUIdle", "GPUSaturated", "GPUMemorySaturated", "GPUMetricsMissing")
RECORDED = "gpu_reactor:container_gpu_utilization:ratio"
SCRAPE_FIX = ("scrape dcgm-exporter: with kube-prometheus-stack, give its ServiceMonitor the stack's release label "
              "(dcgm-exporter chart: serviceMonitor.additionalLabels.release=<release>; GPU Operator: "
              "dcgmExporter.serviceMonitor.additionalLabels)")


def util(pod_label: str = "") -> str:
    """The GPU utilization series, optionally only those naming a pod in `pod_label`."""
    return "{" + UTIL_NAMES + (f', {pod_label}!=""' if pod_label else "") + "}"


def _count(base: str, expr: str) -> int:
    result = prometheus_query(base, f"count({expr})")
    return int(float(result[0]["value"][1])) if result else 0


def dcgm_metrics(base: str) -> Check:
    gpus = _count(base, f"count by (UUID, Hostname, hostname) ({util()})")
    if not gpus:
        return failing("dcgm-metrics", "no DCGM_FI_DEV_GPU_UTIL or DCGM_FI_PROF_GR_ENGINE_ACTIVE series", SCRAPE_FIX)
    hosts = _count(base, f"count by (Hostname, hostname) ({util()})")
    return ok("dcgm-metrics", f"{gpus} GPUs on {hosts} hosts report utilization")


def arriving_spelling(base: str) -> str | None:
    """"exported" when workload labels arrive as exported_pod, "plain" when as pod, None when no series names a pod."""
    if _count(base, util("exported_pod")):
        return "exported"
    if _count(base, util("pod")):
        return "plain"
    return None


def label_spelling(base: str, configured: str | None, source: str) -> Check:
    arriving = arriving_spelling(base)
    if arriving is None:
        return warning("label-spelling", "no GPU series names a pod: no GPU is allocated to a pod yet, or "
                       "dcgm-exporter's Kubernetes attribution is off", "check again once a GPU pod runs")
    if configured is None:
        return warning("label-spelling", f"series arrive with {arriving} labels; the rules' spelling is unknown",
                       "pass --thresholds rules/thresholds.yaml or load the rules")
    if arriving != configured:
        return failing("label-spelling", f"series arrive with {arriving} labels, rules read {configured} ({source})",
                       f"set scrape.labels: {arriving} in rules/thresholds.yaml, `reactor rules render`, reload")
    return ok("label-spelling", f"series arrive with {arriving} labels, as the rules read ({source})")


def loaded_rules(base: str) -> list[dict[str, Any]]:
    body = get_json(f"{base.rstrip('/')}/api/v1/rules")
    groups = body.get("data", {}).get("groups", []) if isinstance(body, dict) else []
    # Every rule of a group that holds one of ours: the rule file's group (and the PrometheusRule's) holds the
    # CPU and memory alerts too, so the count is the one Prometheus shows for it.
    return [r for g in groups if any(_ours(r) for r in g.get("rules", [])) for r in g.get("rules", [])]


def _ours(rule: dict[str, Any]) -> bool:
    return str(rule.get("name", "")).startswith("gpu_reactor:") or rule.get("name") in KNOWN_ALERTS


def spelling_of_rules(rules: Iterable[dict[str, Any]]) -> str | None:
    queries = " ".join(str(r.get("query", "")) for r in rules if str(r.get("name", "")).startswith("gpu_reactor:"))
    if not queries:
        return None
    return "exported" if 'exported_pod!=""' in queries else "plain"


def gpu_rules(base: str, rules: list[dict[str, Any]]) -> Check:
    fix = ("load rules/gpu-reactor.rules.yaml (rule_files), or the PrometheusRule with the stack's release label "
           "(chart: prometheusRule.enabled=true, prometheusRule.labels.release=<release>)")
    if not rules:
        return failing("gpu-rules", "no gpu_reactor recording rules and no GPU* alerts are loaded", fix)
    missing = sorted(set(ALERTS) - {r["name"] for r in rules if r.get("type") == "alerting"})
    if missing:
        return failing("gpu-rules", f"alerts not loaded: {', '.join(missing)}", fix)
    broken = [f"{r['name']}: {r.get('lastError', '')}" for r in rules if r.get("health") not in ("ok", "unknown")]
    if broken:
        return failing("gpu-rules", f"rules fail to evaluate: {'; '.join(broken[:3])}", "fix what the error names")
    if not _count(base, RECORDED):
        return warning("gpu-rules", f"{len(rules)} rules loaded, but {RECORDED} has no series",
                       "no GPU pod measured yet, or the label spelling does not match (see label-spelling)")
    return ok("gpu-rules", f"{len(rules)} rules loaded and evaluating; {RECORDED} has series")


def shared_gpus(base: str, spelling: str | None) -> Check:
    prefix = "exported_" if spelling != "plain" else ""
    by = f"UUID, Hostname, hostname, {prefix}namespace, {prefix}pod"
    series = prometheus_query(base, f"group by ({by}) ({util(prefix + 'pod')})")
    pods: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in series:
        m = s["metric"]
        host = m.get("Hostname") or m.get("hostname", "?")
        pods[(m.get("UUID", "?"), host)].add(f"{m.get(prefix + 'namespace', '?')}/{m.get(prefix + 'pod', '?')}")
    shared = {gpu: sorted(names) for gpu, names in sorted(pods.items()) if len(names) > 1}
    if not shared:
        return ok("shared-gpus", f"no GPU is reported for more than one pod ({len(pods)} GPUs with a pod)")
    named = "; ".join(f"{uuid} on {host}: {', '.join(names)}" for (uuid, host), names in list(shared.items())[:5])
    return warning("shared-gpus", f"{len(shared)} GPUs shared by several pods (time-slicing or MPS): {named}",
                   "their utilization is the whole GPU's: the rules hold these pods (GPUMetricsMissing), the reactor "
                   "never resizes them; give each pod its own GPU or MIG instance to have them managed")
