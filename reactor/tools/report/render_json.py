"""The report as a JSON document, in the versioned shape of schema.json (SCHEMA_VERSION)."""

from __future__ import annotations

import json
from datetime import datetime
from importlib import resources
from typing import Any

from reactor.tools.report.mig import GUIDE
from reactor.tools.report.model import Decision, Episode, Percentiles, Report, Trade, WorkloadReport

SCHEMA_VERSION = "gpu-reactor.io/report/v1"


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every `to_document` answer validates against."""
    text = resources.files("reactor.tools.report").joinpath("schema.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _percentiles(p: Percentiles) -> dict[str, float | None]:
    return {"p50": _round(p.p50), "p95": _round(p.p95), "max": _round(p.max)}


def _episode(e: Episode) -> dict[str, Any]:
    return {"alert": e.alert, "pod": e.pod, "container": e.container, "pendingAt": _time(e.active_at),
            "firedAt": _time(e.fired_at), "resolvedAt": _time(e.resolved_at), "value": _round(e.value)}


def _decision(d: Decision) -> dict[str, Any]:
    return {"at": _time(d.at), "alert": d.alert, "status": d.status, "action": d.action, "strategy": d.strategy,
            "from": d.from_value, "to": d.to_value, "gpuDelta": d.gpu_delta, "reason": d.reason,
            "detail": d.detail, "alerts": [dict(a) for a in d.alerts]}


def _workload(w: WorkloadReport) -> dict[str, Any]:
    fit = w.mig
    return {
        "namespace": w.key.namespace, "kind": w.key.kind, "name": w.key.name, "groupedBy": w.grouping.value,
        "pods": list(w.pods), "gpuHours": _round(w.gpu_hours), "gpusMax": w.gpus_max,
        "utilization": _percentiles(w.utilization), "memory": _percentiles(w.memory),
        "hours": {k: _round(v) for k, v in w.hours.items()},
        "gpuHoursReleased": _round(w.gpu_hours_released), "gpuHoursAdded": _round(w.gpu_hours_added),
        "alerts": [_episode(e) for e in w.episodes], "decisions": [_decision(d) for d in w.decisions],
        "mig": None if fit is None else {"model": fit.model, "profile": fit.profile, "memoryMiB": fit.memory_mib,
                                         "compute": _round(fit.compute), "peakFramebufferMiB": _round(fit.peak_fb_mib),
                                         "peakUtilization": _round(fit.peak_utilization), "source": GUIDE},
    }


def _trade(t: Trade) -> dict[str, Any]:
    return {"namespace": t.namespace, "quota": t.quota, "receiver": str(t.receiver), "donor": str(t.donor),
            "start": _time(t.start), "end": _time(t.end), "hours": _round(t.hours), "gpusShort": t.gpus_short}


def to_document(report: Report) -> dict[str, Any]:
    return {
        "schemaVersion": SCHEMA_VERSION,
        "window": {"since": _time(report.since), "until": _time(report.until), "stepSeconds": report.step_seconds},
        "prometheus": report.prometheus,
        "summary": {
            "workloads": len(report.workloads),
            "gpuHours": _round(sum(w.gpu_hours for w in report.workloads)),
            "gpuHoursReleased": _round(sum(w.gpu_hours_released for w in report.workloads)),
            "gpuHoursAdded": _round(sum(w.gpu_hours_added for w in report.workloads)),
            "actions": sum(1 for w in report.workloads for d in w.decisions if d.action is not None),
        },
        "workloads": [_workload(w) for w in report.workloads],
        "rebalancing": [_trade(t) for t in report.trades],
        "notes": list(report.notes),
    }


def render(report: Report) -> str:
    """Compact (a week of a thousand workloads is tens of MB; `jq .` indents it)."""
    return json.dumps(to_document(report), separators=(",", ":")) + "\n"
