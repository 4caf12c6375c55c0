"""`reactor report`: parse the flags' values, ask Prometheus, build the report, write it."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reactor.cluster.kube import KubeGateway
from reactor.config.fields import parse_duration
from reactor.config.settings import Settings, load_settings
from reactor.core.errors import ConfigError, PermanentError, PrometheusUnavailable, TemporaryError, UsageError
from reactor.core.metrics import Metrics
from reactor.tools.report import owners, render_html, render_json, render_text
from reactor.tools.report.arguments import POINTS
from reactor.tools.report.build import Options, build_namespace, grouping_note
from reactor.tools.report.cluster import ClusterOwners
from reactor.tools.report.collect import Window, collect, namespaces_expr
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.model import Report, WorkloadKey
from reactor.tools.report.source import MAX_BODY_BYTES, PrometheusSource, RangeSource
from reactor.tools.rules import DEFAULT_VALUES, load_values
from reactor.tools.rules.values import Values, build_values

DEFAULT_TIMEOUT = timedelta(seconds=60)


def run_command(args: argparse.Namespace, *, now: datetime | None = None,
                source: RangeSource | None = None) -> int:
    """`reactor report`: 0 written, 1 Prometheus did not answer; a bad argument raises `UsageError`."""
    settings = _settings(args.config)
    until = _until(args.until, now or datetime.now(UTC))
    since = until - _duration("--since", args.since)
    values = _values(args.values)
    step = choose_step(args.step, values, until - since)
    kubeconfig = getattr(args, "kubeconfig", None)
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {kubeconfig}", "no such file; give the path of a kubeconfig file")
    with ExitStack() as stack:
        if source is None:
            api = _api(args, settings)
            stack.callback(api.close)
            source = PrometheusSource(api)
        cluster = None
        if kubeconfig is not None:
            kube = _kube(settings, kubeconfig)
            stack.callback(kube.close)
            cluster = ClusterOwners(kube, settings.adapters).owners
        try:
            report = make_report(source, values, settings, since=since, until=until, step=step,
                                 namespaces=args.namespace, concurrency=max(1, args.concurrency),
                                 repeat=_duration("--repeat-interval", args.repeat_interval),
                                 prometheus=getattr(source, "url", "prometheus"), progress=_progress(until - since),
                                 cluster_owners=cluster)
        except PrometheusUnavailable as e:
            print(f"reactor report: Prometheus did not answer: {e.reason}", file=sys.stderr)
            return 1
        except (TemporaryError, PermanentError) as e:
            print(f"reactor report: the cluster did not answer through {kubeconfig}: {e}", file=sys.stderr)
            return 1
    if args.output == "html":
        text = render_html.render(report, plots=args.plots)
    else:
        text = render_json.render(report) if args.output == "json" else render_text.render(report)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def make_report(source: RangeSource, values: Values, settings: Settings, *, since: datetime, until: datetime,
                step: timedelta, namespaces: Sequence[str] | None = None, concurrency: int = 4,
                repeat: timedelta = timedelta(hours=4), prometheus: str = "prometheus",
                progress: Callable[[int, int], None] | None = None,
                cluster_owners: Callable[[str, Sequence[str]], Mapping[str, WorkloadKey]] | None = None,
                evaluate_locally: bool = True) -> Report:
    """The report of the window. `cluster_owners(namespace, pods)`: the workloads of the pods Prometheus has no
    owner series for, read from the cluster (cluster.py; `--kubeconfig`). `evaluate_locally`: the alerting rules
    evaluated over the recorded series asked for once each (local.py), else each rule inlined and asked of
    Prometheus; a rule the report cannot evaluate is asked of Prometheus either way, and a note says so."""
    expressions = Expressions(values, resolution=step)
    seconds = step.total_seconds()
    # The grid starts `for` early: an alert already pending or firing at `since` is then seen as it was.
    window = Window(_aligned(since - expressions.longest_for, seconds), _aligned(until, seconds), step)
    if not namespaces:
        found = source.query(namespaces_expr(expressions, until - since), until)
        namespaces = sorted({s.labels["namespace"] for s in found if s.labels.get("namespace")})
    options = Options(settings.policy, _aligned(since, seconds), window.end, repeat.total_seconds(),
                      stale_after=values.stale_after.total_seconds())
    workloads, trades = [], []
    by_prometheus: dict[str, str] = {}
    # One namespace at a time: only its answers are held in memory while its workloads are built.
    for done, namespace in enumerate(namespaces, start=1):
        (data,) = collect(source, expressions, [namespace], window, gpu_resource=settings.policy.gpu_resource,
                          concurrency=concurrency, evaluate_locally=evaluate_locally)
        by_prometheus.update(data.evaluated_by_prometheus)
        if cluster_owners is not None:
            asked = owners.unowned(data.pods, data.owners)
            data.cluster_owners = cluster_owners(namespace, asked) if asked else {}
        w, t = build_namespace(data, window, options)
        workloads += w
        trades += t
        del data
        if progress is not None:
            progress(done, len(namespaces))
    notes = _notes(settings, values, step, {w.grouping for w in workloads})
    if evaluate_locally and by_prometheus:
        notes.insert(0, "evaluated by Prometheus, each recorded series inlined (slower), not by the report: "
                     + "; ".join(f"{rule}: {why}" for rule, why in sorted(by_prometheus.items())))
    return Report(options.since, window.end, seconds, prometheus, tuple(workloads), tuple(trades), tuple(notes))


def _notes(settings: Settings, values: Values, step: timedelta, groupings: set[Any]) -> list[str]:
    notes = []
    if not settings.policy.allow:
        notes.append("namespaces.allow is empty in the policy, so every decision is namespace-not-allowed; "
                     "pass --config with the policy you would deploy")
    if step > values.evaluation_interval:
        notes.append(f"step {step} is coarser than the rules' evaluation interval {values.evaluation_interval}: "
                     "a condition shorter than a step can be missed and `for` is counted in steps")
    if groupings:
        notes.append(grouping_note(groupings))
    notes.append("what it cannot know: how the workload would have behaved after a change (the history is what "
                 "happened without it), the action budget across namespaces, annotations (mode, bounds, donor "
                 "opt-in) that Prometheus does not show, and quota scopes")
    return notes


def _aligned(moment: datetime, seconds: float) -> datetime:
    return datetime.fromtimestamp(math.floor(moment.timestamp() / seconds) * seconds, UTC)


def _duration(flag: str, raw: str) -> timedelta:
    try:
        value = parse_duration(flag, raw)
    except ConfigError as e:
        raise UsageError(flag, e.problem) from e
    if value <= timedelta(0):
        raise UsageError(flag, f"must be positive, got {raw!r}")
    return value


def _until(raw: str | None, now: datetime) -> datetime:
    if raw is None:
        return now
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as e:
        raise UsageError("--until", f"not an RFC 3339 time: {raw!r}") from e
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def choose_step(raw: str | None, values: Values, span: timedelta) -> timedelta:
    """`--step`, else the rules' evaluation interval, or the smallest multiple of it that keeps about POINTS
    evaluations over `span` (5 minutes for a week): a multiple, so each step is an evaluation the rules make."""
    if raw is not None:
        return _duration("--step", raw)
    interval = values.evaluation_interval.total_seconds()
    return timedelta(seconds=max(1, math.ceil(span.total_seconds() / POINTS / interval)) * interval)


def _values(path: Path | None) -> Values:
    chosen = path if path is not None else (DEFAULT_VALUES if DEFAULT_VALUES.is_file() else None)
    if chosen is None:
        return build_values({})
    if not chosen.is_file():
        raise UsageError("--values", f"no such file: {chosen}")
    try:
        return load_values(chosen)
    except ConfigError as e:
        raise UsageError(f"--values {chosen}", str(e)) from e


def _settings(path: str | None) -> Settings:
    if path is not None and not Path(path).is_file():
        raise UsageError("--config", f"no such file: {path}")
    return load_settings(path)


def _kube(settings: Settings, kubeconfig: str) -> KubeGateway:
    """The gateway through the kubeconfig, as `reactor plan --kubeconfig` connects; only read through."""
    try:
        return KubeGateway.connect(dataclasses.replace(settings.kube, kubeconfig=kubeconfig), Metrics())
    except ConfigError as e:
        raise UsageError(f"--kubeconfig {kubeconfig}", e.problem) from e


def _api(args: argparse.Namespace, settings: Settings) -> Any:
    from reactor.sources.prometheus import PrometheusApi

    # The confirm step's settings (`confirm.prometheusUrl`, tokenFile, caFile, timeout): the Prometheus the rules run
    # in holds the history; the flags win.
    confirm = settings.confirm
    url = args.prometheus_url or confirm.url
    if not url:
        raise UsageError("--prometheus-url", "required (or confirm.prometheusUrl in --config)")
    # A range query over a week is slower than the confirm step's instant query: its timeout is a floor here.
    timeout = _duration("--timeout", args.timeout) if args.timeout else max(confirm.timeout, DEFAULT_TIMEOUT)
    try:
        return PrometheusApi(url, token_file=args.token_file or confirm.token_file,
                             ca_file=args.ca_file or confirm.ca_file, timeout=timeout,
                             max_body_bytes=MAX_BODY_BYTES, key="--prometheus-url")
    except (ValueError, ConfigError) as e:
        raise UsageError("--prometheus-url", str(e)) from e


def _progress(span: timedelta) -> Callable[[int, int], None] | None:
    """Namespaces done, on stderr, for a long window or a terminal: a week's report takes a while."""
    if span < timedelta(days=1) and not sys.stderr.isatty():
        return None
    shown = [-1]

    def show(done: int, total: int) -> None:
        tenth = done * 10 // total
        if tenth != shown[0]:
            shown[0] = tenth
            print(f"reactor report: {done}/{total} namespaces", file=sys.stderr, flush=True)

    return show


__all__ = ["make_report", "run_command"]
