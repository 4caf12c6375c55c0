"""`reactor report` at scale: 1,000 workloads over 7 days at a 5-minute step (the step the report chooses for a
week), measured in one process: the wall time and the peak memory (RSS) of everything after Prometheus answers —
the per-namespace collection, the replay of every alert's `for` and `keep_firing_for`, the policy's `decide` at
every notification, the accounting, and the text and JSON outputs.

Prometheus itself is replaced by `ScaleSource`, which answers each of the report's queries (recognised by its exact
text, rendered from rules/thresholds.yaml) with the matrix a cluster of that shape gives: 10 namespaces of 100
Deployments, one pod each, 1-4 GPUs; a fifth idle at night (12 hours on, 12 off: alerts fire and resolve daily),
a fifth underutilized, a tenth saturated, the rest busy. The report evaluates the rules itself over the parts of
them that read no recorded series (reactor/tools/report/local.py), which the source answers per GPU or per
container as the recording rules would record them; its own generation of those, in Python, is in the figures. A
real Prometheus evaluating the same queries adds its own time (the tests run them against Prometheus 2.42 on a small
history).

`--real N` measures the same against a real Prometheus instead: N workloads' history (dcgm-exporter and cAdvisor
series at a 1-minute resolution, the same profiles) written with `promtool tsdb create-blocks-from openmetrics`,
served by `prometheus` on a loopback port; then the figures include Prometheus evaluating every query. Writing the
blocks takes about 30 s per hundred workload-weeks (one promtool run per 2-hour block); `--keep DIR` keeps them for
the next run. The report then takes about a minute at N = 1,000 (docs/report.md, "Cost, measured").

Nothing is asserted: a bench measures. `python -m bench.report_scale [--workloads N] [--days D] [--real N [--keep DIR]
[--whole] [--concurrency C]]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reactor.config.settings import build_settings
from reactor.tools.report import local, render_json, render_text
from reactor.tools.report.collect import (
    FB_MIB,
    JOB_OWNER,
    LIMIT_RANGE,
    POD_OWNER,
    POD_PRIORITY,
    QUOTA,
    RS_OWNER,
    SERIES,
)
from reactor.tools.report.command import choose_step, make_report
from reactor.tools.report.evaluation import leaves
from reactor.tools.report.expressions import FB_USED, GPUS, IDLE_GPUS, THROTTLING, UTILIZATION, Expressions
from reactor.tools.report.source import RangeSource, Series
from reactor.tools.rules import load_values, promql
from reactor.tools.rules.cpu import MEMORY_LIMIT_USED

ROOT = Path(__file__).parents[1]
UNTIL = datetime(2026, 11, 9, tzinfo=UTC)
NAMESPACES = 10
DAY = 86400.0
BLOCK = 7200  # promtool writes 2-hour blocks, aligned to the epoch


def _profile(i: int) -> str:
    return ("night-idle", "night-idle", "under", "under", "saturated", "busy", "busy", "busy", "busy", "busy")[i % 10]


def _utilization(profile: str, t: float) -> float:
    if profile == "night-idle":
        return 0.0 if (t % DAY) < DAY / 2 else 0.7
    return {"under": 0.2, "saturated": 0.99, "busy": 0.7}[profile]


# Alert name -> (the profiles whose condition holds, and when it holds)
_CONDITIONS: dict[str, Callable[[str, float], bool]] = {
    "GPUIdle": lambda p, t: p == "night-idle" and (t % DAY) < DAY / 2,
    "GPUUnderutilized": lambda p, t: p == "under" or (p == "night-idle" and (t % DAY) < DAY / 2),
    "GPUSaturated": lambda p, t: p == "saturated",
}


def _series_value(name: str, profile: str, gpus: int, t: float) -> float:
    if name in (UTILIZATION, promql.GPU_UTILIZATION):
        return _utilization(profile, t)
    if name == promql.GPU_REPORTED:
        return t  # `time() * …`: reported at every evaluation
    return {FB_USED: 0.3, promql.GPU_FB_USED: 0.3, GPUS: float(gpus), IDLE_GPUS: 0.0, THROTTLING: 0.0,
            MEMORY_LIMIT_USED: 0.5}[name]


_PER_GPU = (promql.GPU_UTILIZATION, promql.GPU_FB_USED, promql.GPU_REPORTED)  # answered per GPU, not per container


class ScaleSource:
    """Answers the report's queries for a synthetic cluster (see the module's docstring)."""

    url = "synthetic"

    def __init__(self, expressions: Expressions, namespaces: Sequence[str], per_namespace: int) -> None:
        self.per_namespace = per_namespace
        self.queries = 0
        self.kinds: dict[str, tuple[str, str, str]] = {}
        for ns in namespaces:
            self.kinds[expressions.sharing_probe(ns)] = ("probe", ns, "")  # no GPU is shared: answered with nothing
            for variant in (expressions, expressions.without_sharing()):
                for rule in variant.alerts(ns):
                    self.kinds[rule.expr] = ("alert", ns, rule.name)
                for name in (UTILIZATION, FB_USED, GPUS, IDLE_GPUS, THROTTLING):
                    self.kinds[variant.series(name, ns)] = ("series", ns, name)
                # What the report asks for to evaluate the rules itself (local.py): the parts of the recording rules
                # that read no recorded series, each answered as the series it records (the shared GPUs' series:
                # nothing, no GPU is shared).
                step = variant.interval
                plan = local.plan(variant, variant.alerts(ns), step, ns, series=SERIES)
                for name, tree in plan.trees.items():
                    for leaf in leaves(tree, plan.trees) if tree is not None else ():
                        self.kinds[variant.narrow(leaf.source, ns)] = ("series", ns, name)
            self.kinds[expressions.raw(FB_MIB, ns)] = ("fb", ns, "")
            self.kinds[QUOTA.format(ns=ns, gpu="nvidia.com/gpu")] = ("quota", ns, "")
            self.kinds[LIMIT_RANGE.format(ns=ns, gpu="nvidia.com/gpu")] = ("limit", ns, "")
        self.owner_templates = {"pod": POD_OWNER, "replicaset": RS_OWNER, "job": JOB_OWNER, "priority": POD_PRIORITY}

    def _pods(self, ns: str) -> list[tuple[str, str, int, str]]:
        del ns  # every namespace has the same shape
        return [(f"w{i:03d}", f"w{i:03d}-6c5d8f7b9-x{i:04d}", 1 + i % 4, _profile(i))
                for i in range(self.per_namespace)]

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> list[Series]:
        self.queries += 1
        kind, ns, name = self.kinds.get(expr, ("", "", ""))
        grid = [start.timestamp() + k * step.total_seconds()
                for k in range(int((end - start) / step) + 1)]
        found = []
        if kind == "probe":
            return []
        if kind == "quota":
            used = sum(g for _, _, g, _ in self._pods(ns))
            return [Series.of({"resourcequota": "gpu", "type": t, "namespace": ns}, tuple((x, float(v)) for x in grid))
                    for t, v in (("hard", used + used // 10), ("used", used))]
        if kind == "limit":
            return [Series.of({"constraint": c, "namespace": ns}, tuple((x, float(v)) for x in grid))
                    for c, v in (("min", 1), ("max", 8))]
        if name == promql.SHARED:
            return []
        for _, pod, gpus, profile in self._pods(ns):
            labels = {"namespace": ns, "pod": pod, "container": "main"}
            if name in _PER_GPU:
                # one series per GPU, as the rules record them
                per_gpu = [{**labels, "gpu": str(g), "UUID": f"GPU-{g}-{pod}"} for g in range(gpus)]
                per_gpu = [{"UUID": u["UUID"]} for u in per_gpu] if name == promql.GPU_REPORTED else per_gpu
                found += [Series.of(u, tuple((x, _series_value(name, profile, gpus, x)) for x in grid))
                          for u in per_gpu]
                continue
            if kind == "alert":
                holds = _CONDITIONS.get(name)
                samples = tuple((x, _utilization(profile, x)) for x in grid if holds and holds(profile, x))
            elif kind == "series":
                samples = tuple((x, _series_value(name, profile, gpus, x)) for x in grid)
            elif kind == "fb":
                labels = {**labels, "modelName": "NVIDIA H100 80GB HBM3"}
                samples = tuple((x, 12000.0) for x in grid)
            else:
                continue
            if samples:
                found.append(Series.of(labels, samples))
        return found

    def query(self, expr: str, at: datetime | None = None) -> list[Series]:
        self.queries += 1
        for key, template in self.owner_templates.items():
            for ns in {k[1] for k in self.kinds.values()}:
                if expr.startswith(template.split("{{")[0]) and f'namespace="{ns}"' in expr:
                    return self._owners(key, ns)
        return []

    def _owners(self, key: str, ns: str) -> list[Series]:
        at = ((UNTIL.timestamp(), 1.0),)
        if key == "pod":
            return [Series.of({"namespace": ns, "pod": pod, "owner_kind": "ReplicaSet",
                            "owner_name": pod.rsplit("-", 1)[0]}, at) for _, pod, _, _ in self._pods(ns)]
        if key == "replicaset":
            return [Series.of({"namespace": ns, "replicaset": pod.rsplit("-", 1)[0], "owner_kind": "Deployment",
                            "owner_name": w}, at) for w, pod, _, _ in self._pods(ns)]
        return []


def run(workloads: int, days: int) -> dict[str, object]:
    values = load_values(ROOT / "rules/thresholds.yaml")
    namespaces = [f"team-{i}" for i in range(NAMESPACES)]
    settings = build_settings({"namespaces": {"allow": namespaces}}, {})
    since = UNTIL - timedelta(days=days)
    step = choose_step(None, values, UNTIL - since)
    source = ScaleSource(Expressions(values, resolution=step), namespaces, workloads // NAMESPACES)
    started = time.perf_counter()
    report = make_report(source, values, settings, since=since, until=UNTIL, step=step, namespaces=namespaces)
    built = time.perf_counter()
    text, document = render_text.render(report), render_json.render(report)
    done = time.perf_counter()
    decisions = sum(len(w.decisions) for w in report.workloads)
    return {
        "workloads": len(report.workloads), "days": days, "step_seconds": step.total_seconds(),
        "queries": source.queries, "decisions": decisions,
        "actions": sum(1 for w in report.workloads for d in w.decisions if d.action is not None),
        "report_seconds": round(built - started, 2), "render_seconds": round(done - built, 2),
        "total_seconds": round(done - started, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "text_bytes": len(text), "json_bytes": len(document), "load_average": os.getloadavg()[0],
    }


_EXPORTER = ('job="dcgm-exporter",namespace="gpu-operator",pod="nvidia-dcgm-exporter-abcde",'
             'container="nvidia-dcgm-exporter",instance="10.0.0.9:9400"')


def _suffix(i: int) -> str:
    """A pod name's random suffix as the ReplicaSet controller draws it (k8s.io/apimachinery rand.String's
    alphabet, no vowels nor 0, 1, 3), here counted: the report then groups the pods by name."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[(i // len(alphabet) ** k) % len(alphabet)] for k in range(5))


def _history(path: Path, workloads: int, lo: int, hi: int, origin: int) -> None:
    """OpenMetrics text of `workloads` Deployments' pods (one GPU each, `_profile`'s shapes) in namespace `team`,
    their samples in [lo, hi) every minute (`origin`: when the CFS counters started)."""
    pods = [(f"w{i:03d}-6c5d8f7b9-{_suffix(i)}", _profile(i)) for i in range(workloads)]
    with path.open("w", encoding="utf-8") as out:
        for name in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"):
            out.write(f"# TYPE {name} gauge\n")
            for i, (pod, profile) in enumerate(pods):
                labels = (f'{_EXPORTER},gpu="0",UUID="GPU-{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="n{i % 8}",'
                          f'exported_namespace="team",exported_pod="{pod}",exported_container="main"')
                for t in range(lo, hi, 60):
                    v = _utilization(profile, t) if name.endswith("ACTIVE") else (
                        12000 if name.endswith("USED") else 69000)
                    out.write(f"{name}{{{labels}}} {v:g} {t}\n")
        for name in ("container_cpu_cfs_periods", "container_cpu_cfs_throttled_periods"):
            out.write(f"# TYPE {name} counter\n")
            for pod, _ in pods:
                labels = f'job="kubelet",namespace="team",pod="{pod}",container="main"'
                for t in range(lo, hi, 60):
                    out.write(f"{name}_total{{{labels}}} {0 if 'throttled' in name else 10 * (t - origin):g} {t}\n")
        out.write("# EOF\n")


def write_history(tsdb: Path, workloads: int, days: int) -> None:
    """The blocks, one promtool run per 2-hour block: promtool reads its whole input once per block the input
    spans, so one file of a week is read 84 times (40 minutes for 1,000 workloads), one file per block once."""
    import subprocess

    start, end = int(UNTIL.timestamp() - days * DAY), int(UNTIL.timestamp())
    chunk = tsdb.parent / "chunk.om"
    for lo in range(start, end + 1, BLOCK):
        _history(chunk, workloads, lo, min(lo + BLOCK, end + 1), start)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(chunk), str(tsdb)],
                       check=True, capture_output=True)
    chunk.unlink()


class TimedSource:
    """The report's `RangeSource` over the real client, timing each query (client time: Prometheus evaluating,
    the transfer and the JSON parsing)."""

    def __init__(self, inner: RangeSource) -> None:
        self.inner = inner
        self.url = getattr(inner, "url", "prometheus")
        self.times: list[tuple[float, str]] = []

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> Sequence[Series]:
        started = time.perf_counter()
        try:
            return self.inner.query_range(expr, start, end, step)
        finally:
            self.times.append((time.perf_counter() - started, expr))

    def query(self, expr: str, at: datetime | None = None) -> Sequence[Series]:
        started = time.perf_counter()
        try:
            return self.inner.query(expr, at)
        finally:
            self.times.append((time.perf_counter() - started, expr))


def _named(expressions: Expressions, expr: str) -> str:
    for variant in (expressions, expressions.without_sharing()):
        for rule in variant.alerts("team"):
            if rule.expr == expr:
                return rule.name
        for name in (UTILIZATION, FB_USED, GPUS, IDLE_GPUS, THROTTLING):
            if variant.series(name, "team") == expr:
                return name
        plan = local.plan(variant, variant.alerts("team"), variant.interval, "team", series=SERIES)
        for name, tree in plan.trees.items():
            if tree is not None and any(variant.narrow(leaf.source, "team") == expr
                                        for leaf in leaves(tree, plan.trees)):
                return f"{name} (its raw part)"
    return "sharing probe" if expr == expressions.sharing_probe("team") else expr.split("{")[0][:40]


def _peak_rss_mib(pid: int) -> float:
    """A child's peak resident set (VmHWM), read before it exits."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def run_real(workloads: int, days: int, *, keep: Path | None, whole: bool, concurrency: int) -> dict[str, object]:
    """The report of a real Prometheus 2.42 serving a generated history (see the module's docstring). `keep`: write
    the history there, or reuse the one written there before. `whole`: the rules with their sharing clauses at every
    query (the report before the sharing probe), for a before/after comparison."""
    import subprocess
    import tempfile
    import urllib.request

    from reactor.sources.prometheus import PrometheusApi
    from reactor.tools.launcher import free_port
    from reactor.tools.report import collect
    from reactor.tools.report.source import PrometheusSource

    values = load_values(ROOT / "rules/thresholds.yaml")
    settings = build_settings({"namespaces": {"allow": ["team"]}}, {})
    if whole:
        collect.shares_gpus = lambda *args, **kwargs: True
    with tempfile.TemporaryDirectory(prefix="report-scale-") as scratch:
        work = keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        marker = work / f"history-{workloads}x{days}d"
        if not marker.exists():
            write_history(work / "tsdb", workloads, days)
            marker.touch()
        written = time.perf_counter()
        (work / "prometheus.yml").write_text("{}\n", encoding="utf-8")
        port = free_port()
        prometheus = subprocess.Popen(["prometheus", f"--config.file={work}/prometheus.yml",
                                       f"--storage.tsdb.path={work}/tsdb", "--storage.tsdb.retention.time=100y",
                                       f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1):
                        break
                except OSError:
                    time.sleep(0.2)
            api = PrometheusApi(f"http://127.0.0.1:{port}", timeout=3600, max_body_bytes=1 << 30)
            since = UNTIL - timedelta(days=days)
            step = choose_step(None, values, UNTIL - since)
            source = TimedSource(PrometheusSource(api))
            load = os.getloadavg()[0]
            ready = time.perf_counter()
            report = make_report(source, values, settings, since=since, until=UNTIL, step=step,
                                 namespaces=["team"], concurrency=concurrency)
            done = time.perf_counter()
            api.close()
            prometheus_rss = _peak_rss_mib(prometheus.pid)
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)
    expressions = Expressions(values, resolution=step)
    slowest = sorted(source.times, reverse=True)[:6]
    return {
        "workloads": len(report.workloads), "days": days, "step_seconds": step.total_seconds(),
        "sharing_clauses": "always" if whole else "probed",
        "actions": sum(1 for w in report.workloads for d in w.decisions if d.action is not None),
        "queries": len(source.times), "query_seconds_summed": round(sum(t for t, _ in source.times), 1),
        "slowest_queries": [f"{_named(expressions, e)}: {t:.1f}s" for t, e in slowest],
        "concurrency": concurrency, "history_seconds": round(written - started, 1),
        "report_seconds": round(done - ready, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "prometheus_peak_rss_mib": prometheus_rss, "load_average_before": load,
        "load_average_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--real", type=int, metavar="N", help="N workloads against a real Prometheus instead")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="--real: write the history here, or reuse it")
    parser.add_argument("--whole", action="store_true", help="--real: the rules' sharing clauses in every query "
                                                              "(as before the sharing probe)")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    figures = (run(args.workloads, args.days) if args.real is None
               else run_real(args.real, args.days, keep=args.keep, whole=args.whole, concurrency=args.concurrency))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
