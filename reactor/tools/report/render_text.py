"""The report as a terminal table: workloads sorted by GPU-hours the policy would have given back."""

from __future__ import annotations

from reactor.tools.report.model import Grouping, Percentiles, Report, WorkloadReport

_MARK = {Grouping.KUBECONFIG: "+", Grouping.POD_NAME: "*"}  # how the workload's pods were grouped, where not by
# kube-state-metrics' owner series
COLUMNS = ("WORKLOAD", "GPU-H", "RELEASABLE", "ADDED", "UTIL p50/p95", "IDLE h", "UNDER h", "SAT h", "ACTIONS", "MIG")


def ordered(report: Report) -> list[WorkloadReport]:
    return sorted(report.workloads, key=lambda w: (-w.gpu_hours_released, -w.gpu_hours, w.key))


def _pct(p: Percentiles) -> str:
    def one(v: float | None) -> str:
        return "-" if v is None else f"{v * 100:.0f}%"

    return f"{one(p.p50)}/{one(p.p95)}"


def _row(w: WorkloadReport) -> tuple[str, ...]:
    actions = [d for d in w.decisions if d.action is not None]
    return (f"{w.key}{_MARK.get(w.grouping, '')}", f"{w.gpu_hours:.1f}", f"{w.gpu_hours_released:.1f}",
            f"{w.gpu_hours_added:.1f}",
            _pct(w.utilization), f"{w.hours['idle']:.1f}", f"{w.hours['underutilized']:.1f}",
            f"{w.hours['saturated']:.1f}", str(len(actions)), w.mig.profile if w.mig else "-")


def render(report: Report) -> str:
    rows = [COLUMNS, *(_row(w) for w in ordered(report))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [f"GPU Reactor report {report.since:%Y-%m-%d %H:%M} → {report.until:%Y-%m-%d %H:%M} UTC, "
             f"step {report.step_seconds:g}s, from {report.prometheus}", ""]
    lines += ["  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(r))
              for r in rows]
    released = sum(w.gpu_hours_released for w in report.workloads)
    total = sum(w.gpu_hours for w in report.workloads)
    lines += ["", f"{len(report.workloads)} workloads held {total:.1f} GPU-hours; the policy would have released "
                  f"{released:.1f} and added {sum(w.gpu_hours_added for w in report.workloads):.1f}."]
    for w in ordered(report):
        for d in w.decisions:
            if d.action is not None:
                lines.append(f"  {d.at:%Y-%m-%d %H:%M} {w.key}: {d.alert} → {d.strategy} {d.from_value} → {d.to_value}")
    for t in report.trades:
        lines.append(f"  rebalance: {t.receiver} was refused for quota {t.quota or '?'} while {t.donor} had a donor "
                     f"alert firing, {t.hours:.1f} h from {t.start:%Y-%m-%d %H:%M}")
    if any(w.grouping is Grouping.KUBECONFIG for w in report.workloads):
        lines.append("  + grouped by the pods' ownerReferences in the cluster (--kubeconfig): no kube-state-metrics "
                     "owner series")
    if any(w.grouping is Grouping.POD_NAME for w in report.workloads):
        lines.append("  * grouped by pod name (no kube-state-metrics owner series): a guess")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"
