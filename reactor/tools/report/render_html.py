"""The report as one self-contained HTML page: a summary table and, per workload, a plot of its utilization and
GPUs held over time with the would-be actions marked. Works offline (air-gapped clusters): the plots are inline
SVG drawn by matplotlib (the `report` extra), no JavaScript, no CDN, no fonts or images fetched."""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime
from typing import Any

from reactor.core.errors import UsageError
from reactor.tools.report.model import Report, WorkloadReport
from reactor.tools.report.render_text import ordered

_STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}td:first-child,th:first-child{text-align:left}
section{margin:1.5em 0}svg{max-width:100%;height:auto}.note{color:#555}"""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("svg")  # no display: render to SVG text only
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UsageError("--output html", "needs matplotlib: pip install 'gpu-reactor[report]'") from e
    plt.rcParams["svg.fonttype"] = "path"  # glyphs as paths: no font needed where the page is opened
    plt.rcParams["svg.hashsalt"] = "gpu-reactor"  # stable element ids: the same report renders the same bytes
    return plt


def plot(w: WorkloadReport, plt: Any) -> str:
    """Utilization (left axis) and GPUs held (right axis) over time; the would-be actions as vertical lines."""
    times = [datetime.fromtimestamp(t, UTC) for t in w.timeline.times]
    fig, ax = plt.subplots(figsize=(9, 2.6))
    ax.plot(times, [u * 100 for u in w.timeline.utilization],
            color="tab:blue", linewidth=1, label="utilization %")
    ax.set_ylim(0, 105)
    ax.set_ylabel("utilization %")
    held = ax.twinx()
    held.step(times, w.timeline.gpus, where="post", color="tab:orange", linewidth=1, label="GPUs held")
    if list(w.timeline.with_changes) != list(w.timeline.gpus):
        held.step(times, w.timeline.with_changes, where="post", color="tab:green", linewidth=1, linestyle="--",
                  label="GPUs with the changes")
    held.set_ylabel("GPUs")
    held.set_ylim(0, max(1.0, max(w.timeline.gpus, default=1)) * 1.2)
    for d in w.decisions:
        if d.action is not None:
            ax.axvline(d.at, color="tab:red", linestyle="--", linewidth=1)
            ax.annotate(f"{d.strategy} {d.from_value}→{d.to_value}", (d.at, 100), fontsize=7, color="tab:red",
                        rotation=90, va="top", ha="right")
    ax.set_title(str(w.key), fontsize=9)
    lines = ax.get_legend_handles_labels()[0] + held.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], fontsize=7, loc="lower right")
    fig.autofmt_xdate()
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]


def render(report: Report, *, plots: int = 100) -> str:
    """The page; plots for the first `plots` workloads of the table (most GPU-hours recoverable first): a thousand
    SVG plots would make a page of hundreds of MB, and the table already lists every workload."""
    plt = _pyplot()
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(str(w.key))}</td><td>{w.gpu_hours:.1f}</td><td>{w.gpu_hours_released:.1f}</td>"
        f"<td>{w.gpu_hours_added:.1f}</td><td>{w.hours['idle']:.1f}</td><td>{w.hours['underutilized']:.1f}</td>"
        f"<td>{w.hours['saturated']:.1f}</td><td>{sum(1 for d in w.decisions if d.action)}</td>"
        f"<td>{esc(w.mig.profile) if w.mig else '-'}</td></tr>" for w in ordered(report))
    released = sum(w.gpu_hours_released for w in report.workloads)
    total = sum(w.gpu_hours for w in report.workloads)
    shown = ordered(report)[:max(0, plots)]
    sections = "".join(f"<section><h3>{esc(str(w.key))}</h3>{plot(w, plt)}</section>" for w in shown)
    if len(shown) < len(report.workloads):
        sections = (f"<p class=note>Plots of the first {len(shown)} workloads of the table, of "
                    f"{len(report.workloads)} (--plots).</p>{sections}")
    trades = "".join(f"<li>{esc(str(t.receiver))} refused for quota {esc(t.quota)} while {esc(str(t.donor))} "
                     "had a donor alert firing: "
                     f"{t.hours:.1f} h from {t.start:%Y-%m-%d %H:%M}</li>" for t in report.trades)
    notes = "".join(f"<li class=note>{esc(n)}</li>" for n in report.notes)
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>GPU Reactor report</title>"
        f"<style>{_STYLE}</style></head><body><h1>GPU Reactor report</h1>"
        f"<p>{report.since:%Y-%m-%d %H:%M} → {report.until:%Y-%m-%d %H:%M} UTC, step {report.step_seconds:g}s, "
        f"from {esc(report.prometheus)}. {len(report.workloads)} workloads held {total:.1f} GPU-hours; the policy "
        f"would have released {released:.1f}.</p>"
        "<table><tr><th>workload</th><th>GPU-h</th><th>releasable</th><th>added</th><th>idle h</th><th>under h</th>"
        f"<th>saturated h</th><th>actions</th><th>MIG</th></tr>{rows}</table>"
        f"{'<h2>Rebalancing</h2><ul>' + trades + '</ul>' if trades else ''}"
        f"<ul>{notes}</ul>{sections}</body></html>\n"
    )
