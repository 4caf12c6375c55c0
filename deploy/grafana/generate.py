"""Writes gpu-reactor-dashboard.json, the Grafana dashboard SREs open first for the reactor.

Plain Grafana JSON (schemaVersion 39), stdlib only. Run after editing, commit both files:
    python deploy/grafana/generate.py
tests/deploy checks that the committed JSON equals this script's output and that every query uses
only the reactor's metric names and the recording rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("gpu-reactor-dashboard.json")
# The Helm chart can only read files inside itself: its dashboard ConfigMap carries this copy.
CHART_COPY = Path(__file__).parents[1] / "helm" / "gpu-reactor" / "files" / "gpu-reactor-dashboard.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
RATE = "$__rate_interval"
# Recording rules from rules/gpu-reactor.rules.yaml (labels namespace, pod, container).
UTIL = "gpu_reactor:container_gpu_utilization:ratio"
FB_USED = "gpu_reactor:container_gpu_fb_used:max_ratio"
GPUS = "gpu_reactor:container_gpus:count"
IDLE = "gpu_reactor:container_idle_gpus:count"


# What the GPU-hours "saved" mean (README: Observability), shown on the panel.
SAVED = ("GPU-hours the reactor's standing changes held back: for each workload whose GPUs (per pod × replicas) it "
         "lowered, (recorded original − current) × time, while the workload stays as the reactor left it (no one "
         "else changed its GPUs or replicas, not reverted, not deleted, in an allowed namespace). Counted by the "
         "replica that leads the verifier Lease, from its first verification of the change; a restart starts from "
         "zero. GPUs requested, not GPUs measured idle.")


def target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


def panel(
    title: str,
    targets: list[tuple[str, str]],
    *,
    grid: tuple[int, int, int, int],
    kind: str = "timeseries",
    unit: str = "short",
    description: str = "",
    stack: bool = False,
) -> dict[str, Any]:
    x, y, w, h = grid
    custom: dict[str, Any] = {}
    if kind == "timeseries":
        custom = {"drawStyle": "line", "fillOpacity": 20 if stack else 0, "showPoints": "never",
                  "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]}}
        if kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
        "targets": [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def row(title: str, y: int) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}


def panels() -> list[dict[str, Any]]:
    return [
        row("Overview", 0),
        panel("Actions applied (range)", [(f'sum(increase(reactor_actions_total{{result="applied",{NS}}}[$__range]))', "applied")],
              grid=(0, 1, 5, 4), kind="stat", description="Changes written to workloads in the selected range."),
        panel("Actions failed (range)", [(f'sum(increase(reactor_actions_total{{result="failed",{NS}}}[$__range]))', "failed")],
              grid=(5, 1, 5, 4), kind="stat"),
        panel("GPUs released (range)", [(f'sum(increase(reactor_gpus_changed_total{{direction="released",{NS}}}[$__range]))', "released")],
              grid=(10, 1, 5, 4), kind="stat", description="GPU requests removed from pod templates: what lets the Cluster Autoscaler free nodes."),
        panel("Webhook 5xx ratio", [(f'sum(rate(reactor_webhook_requests_total{{code=~"5.."}}[{RATE}])) / sum(rate(reactor_webhook_requests_total[{RATE}]))', "5xx")],
              grid=(15, 1, 4, 4), kind="stat", unit="percentunit"),
        panel("Replicas and version", [("count by (version) (reactor_build_info)", "{{version}}")],
              grid=(19, 1, 5, 4), kind="stat"),
        row("Decisions", 5),
        panel("Actions by action and result", [(f"sum by (action, result) (rate(reactor_actions_total{{{NS}}}[{RATE}]))", "{{action}} {{result}}")],
              grid=(0, 6, 12, 8), unit="ops", stack=True,
              description="applied: written; recommended: dry run or recommend mode; failed: the write failed."),
        panel("Alerts skipped before a decision", [(f"sum by (reason) (rate(reactor_alerts_skipped_total[{RATE}]))", "{{reason}}")],
              grid=(12, 6, 6, 8), unit="ops", stack=True,
              description="Alerts per second refused before any workload decision (screening, resolving the owner): one per alert."),
        panel("Workload decisions skipped", [(f"sum by (reason) (rate(reactor_workload_skips_total[{RATE}]))", "{{reason}}")],
              grid=(18, 6, 6, 8), unit="ops", stack=True,
              description="Workload decisions per second that refused to act: one per workload per notification, however many alerts name it."),
        panel("GPUs released and added", [(f"sum by (direction) (increase(reactor_gpus_changed_total{{{NS}}}[{RATE}]))", "{{direction}}")],
              grid=(0, 14, 12, 8), kind="timeseries", unit="short"),
        panel("Alerts received", [(f"sum by (alertname, status) (rate(reactor_alerts_received_total[{RATE}]))", "{{alertname}} {{status}}")],
              grid=(12, 14, 12, 8), unit="ops"),
        panel("Action budget use", [
            ("max by (scope) (reactor_budget_used) / max by (scope) (reactor_budget_limit)", "{{scope}}"),
        ], grid=(0, 22, 8, 8), unit="percentunit",
              description="Share of the storm brake's window used now (read when scraped). At 100% the reactor skips with reason budget-exhausted."),
        panel("Kubernetes API errors", [(f'sum by (code, verb, resource) (rate(reactor_kube_requests_total{{code!~"2.."}}[{RATE}]))', "{{code}} {{verb}} {{resource}}")],
              grid=(8, 22, 8, 8), unit="reqps",
              description="409: lost a race to another replica or controller (retried). 403: RBAC. 422: invalid patch."),
        panel("Alerts Alertmanager left out", [(f"sum(increase(reactor_alerts_truncated_total[{RATE}]))", "truncated")],
              grid=(16, 22, 8, 8), unit="short",
              description="Alerts dropped from notifications past the receiver's max_alerts (truncatedAlerts): the reactor never saw them."),
        row("Webhook", 30),
        panel("Webhook requests by code", [(f"sum by (code) (rate(reactor_webhook_requests_total[{RATE}]))", "{{code}}")],
              grid=(0, 31, 8, 8), unit="reqps", stack=True),
        panel("Webhook error rate", [
            (f'sum(rate(reactor_webhook_requests_total{{code=~"5.."}}[{RATE}])) / sum(rate(reactor_webhook_requests_total[{RATE}]))', "5xx (Alertmanager retries)"),
            (f'sum(rate(reactor_webhook_requests_total{{code=~"4.."}}[{RATE}])) / sum(rate(reactor_webhook_requests_total[{RATE}]))', "4xx (dropped: bad payload or token)"),
        ], grid=(8, 31, 8, 8), unit="percentunit"),
        panel("Webhook latency", [
            (f"histogram_quantile(0.5, sum by (le) (rate(reactor_webhook_duration_seconds_bucket[{RATE}])))", "p50"),
            (f"histogram_quantile(0.99, sum by (le) (rate(reactor_webhook_duration_seconds_bucket[{RATE}])))", "p99"),
            (f"sum(rate(reactor_webhook_duration_seconds_sum[{RATE}])) / sum(rate(reactor_webhook_duration_seconds_count[{RATE}]))", "mean"),
        ], grid=(16, 31, 8, 8), unit="s"),
        row("Verification and GPU-hours", 48),
        panel("Rollouts verified and reverted", [(f"sum by (result) (increase(reactor_verifications_total[{RATE}]))", "{{result}}")],
              grid=(0, 49, 6, 8), unit="short", stack=True,
              description="After each change the reactor follows the rollout: reverted = stalled past verify.timeout."),
        panel("GPUs held back and added now", [
            (f"sum by (namespace) (reactor_gpus_released{{{NS}}})", "{{namespace}} released"),
            (f"sum by (namespace) (reactor_gpus_added{{{NS}}})", "{{namespace}} added"),
        ], grid=(6, 49, 6, 8), unit="short",
              description="GPUs (per pod × replicas) the reactor's standing changes hold back or add now: recorded original minus current, read when scraped. A change stops counting once anyone else changes the workload's GPUs or replicas, it is reverted or deleted, or its namespace is no longer allowed."),
        panel("GPU-hours saved (range)", [(f"sum(increase(reactor_gpu_seconds_saved_total{{{NS}}}[$__range])) / 3600", "GPU-hours")],
              grid=(12, 49, 6, 8), kind="stat", description=SAVED),
        panel("Cost of the GPU-hours saved (range)", [(f"sum(increase(reactor_gpu_cost_saved_total{{{NS}}}[$__range]))", "cost")],
              grid=(18, 49, 6, 8), kind="stat",
              description="The GPU-hours saved at finops.gpuHourlyCost, in its currency; no data without a price."),
        panel("Verifier backlog and leadership", [
            ("sum(reactor_verifications_pending)", "changes being followed"),
            ("sum(reactor_verifier_leader)", "replicas verifying (1 expected)"),
        ], grid=(0, 57, 8, 8), unit="short",
              description="Read when scraped: the changes whose rollout the verifier still follows, and the replicas that hold the verifier Lease."),
        panel("Watch cache", [
            ("sum by (kind) (reactor_cache_objects)", "{{kind}} objects"),
            ("min by (kind) (reactor_cache_synced)", "{{kind}} synced"),
        ], grid=(8, 57, 8, 8), unit="short",
              description="Objects the watch cache holds and whether every informer of the kind has listed (1) — no data with kube.watchCache off."),
        panel("Reactor process", [
            ("sum by (pod) (process_resident_memory_bytes and on (job, instance) reactor_build_info)", "{{pod}} resident memory"),
        ], grid=(16, 57, 8, 8), unit="bytes",
              description="The reactor's resident memory, from the process collector on its own /metrics (the targets that also export reactor_build_info)."),
        row("GPU utilization (recording rules)", 39),
        panel("GPU utilization by namespace", [(f"avg by (namespace) ({UTIL}{{{NS}}})", "{{namespace}}")],
              grid=(0, 40, 8, 8), unit="percentunit", description="Mean over the namespace's GPU containers."),
        panel("GPU memory used by namespace (fullest container)", [(f"max by (namespace) ({FB_USED}{{{NS}}})", "{{namespace}}")],
              grid=(8, 40, 8, 8), unit="percentunit"),
        panel("GPUs held and idle by namespace", [
            (f"sum by (namespace) ({GPUS}{{{NS}}})", "{{namespace}} held"),
            (f"sum by (namespace) ({IDLE}{{{NS}}})", "{{namespace}} idle"),
        ], grid=(16, 40, 8, 8), unit="short", description="Idle GPUs as the recording rule defines them (rules/thresholds.yaml)."),
    ]


def dashboard() -> dict[str, Any]:
    return {
        "uid": "gpu-reactor",
        "title": "GPU Reactor",
        "description": "What the GPU Reactor did, what it declined, and how its webhook and API calls behave.",
        "tags": ["gpu", "gpu-reactor"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                 "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
                {"name": "namespace", "label": "Namespace", "type": "query", "datasource": DS,
                 "query": {"query": f"label_values({GPUS}, namespace)", "refId": "namespace"},
                 "definition": f"label_values({GPUS}, namespace)",
                 "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "sort": 1,
                 "current": {"text": "All", "value": "$__all"}, "hide": 0, "options": []},
            ]
        },
        "panels": _numbered(panels()),
    }


def _numbered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": i, **p} for i, p in enumerate(items, start=1)]


def render() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    for path in (OUT, CHART_COPY):
        path.write_text(render(), encoding="utf-8")
