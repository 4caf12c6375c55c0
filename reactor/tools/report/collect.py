"""Ask Prometheus, one namespace at a time, for everything a report reads; nothing else talks to it.

Cost is bounded: every query is narrowed to one namespace, a long window is split into pieces of at most
`PIECE_STEPS` evaluations (so no one query runs into Prometheus's own query timeout, 2 minutes by default, nor its
11,000 points per series), at most `concurrency` queries run at once, and each has the client's timeout. Progress
goes to the `progress` callback (stderr in the CLI). The alerting rules are evaluated here over the recorded series
they read, each asked for once (local.py); a rule the evaluator does not know is asked of Prometheus inlined, as
`NamespaceData.evaluated_by_prometheus` records.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from reactor.tools.report import blocks, local
from reactor.tools.report import expressions as ex
from reactor.tools.report.expressions import AlertRule, Expressions
from reactor.tools.report.frames import Frame
from reactor.tools.report.local import Plan
from reactor.tools.report.model import WorkloadKey
from reactor.tools.report.source import RangeSource, Series
from reactor.tools.report.syntax import Node, Unsupported

MAX_POINTS = 10_000  # Prometheus refuses more than 11,000 points per series in one range query
# A day at the 5-minute step a week's report uses. A query's time grows with its evaluations times the namespace's
# series: a week of 1,000 containers in one query ran past Prometheus's 2-minute --query.timeout (2.42, on two
# cores). Each piece evaluates its subqueries' lead-in (up to the rules' `reach`, 2 h) again: a few percent more.
# The pieces answer at the same times as one query would (start + k·step; subqueries align to multiples of their
# step), so their samples join without a seam.
PIECE_STEPS = 288
# A query without subqueries (the leaves local.py asks for, the raw framebuffer) has no lead-in to repeat: its pieces
# are half a day, so the four in flight hold half the parsed JSON (a day of 1,000 series is ~50 MiB while it is read)
# and the rules are evaluated over half a day at a time (blocks.py). Measured for 1,000 workloads over 2 days: 14.6 s
# and 261 MiB at 144 steps, 14.2 s and 350 MiB at 288, 18.4 s and 222 MiB at 72.
LEAN_PIECE_STEPS = 144
_SUBQUERY = re.compile(r"\[[0-9a-z]+:[0-9a-z]*\]")
FB_MIB = "DCGM_FI_DEV_FB_USED{m}"
QUOTA = 'kube_resourcequota{{namespace="{ns}", resource="requests.{gpu}"}}'
LIMIT_RANGE = 'kube_limitrange{{namespace="{ns}", resource="{gpu}", type="Container"}}'
POD_OWNER = 'max by (namespace, pod, owner_kind, owner_name) (last_over_time(kube_pod_owner{{namespace="{ns}"}}[{w}]))'
RS_OWNER = ('max by (namespace, replicaset, owner_kind, owner_name) '
            '(last_over_time(kube_replicaset_owner{{namespace="{ns}"}}[{w}]))')
JOB_OWNER = ('max by (namespace, job_name, owner_kind, owner_name) '
             '(last_over_time(kube_job_owner{{namespace="{ns}"}}[{w}]))')
SERIES = (ex.UTILIZATION, ex.FB_USED, ex.GPUS, ex.IDLE_GPUS, ex.THROTTLING)  # read per container besides the alerts
POD_PRIORITY = 'max by (namespace, pod, priority_class) (last_over_time(kube_pod_info{{namespace="{ns}"}}[{w}]))'


@dataclass(frozen=True, slots=True)
class Window:
    """The evaluation grid: `start` and `end` aligned to `step` (Prometheus answers at start + k·step)."""

    start: datetime
    end: datetime
    step: timedelta

    def widened(self, steps: int) -> Window:
        """The same grid begun `steps` steps earlier."""
        return Window(self.start - steps * self.step, self.end, self.step)

    @property
    def grid(self) -> list[float]:
        first, last, step = self.start.timestamp(), self.end.timestamp(), self.step.total_seconds()
        return [first + k * step for k in range(int((last - first) // step) + 1)]


@dataclass(slots=True)
class NamespaceData:
    """What Prometheus said about one namespace over the window."""

    namespace: str
    alerts: list[tuple[AlertRule, Sequence[Series]]] = field(default_factory=list)
    series: dict[str, Sequence[Series]] = field(default_factory=dict)  # ex.UTILIZATION, FB_USED, GPUS, … THROTTLING
    fb_mib: Sequence[Series] = ()
    owners: dict[str, Sequence[Series]] = field(default_factory=dict)  # "pod", "replicaset", "job", "priority"
    quota: Sequence[Series] = ()
    limit_range: Sequence[Series] = ()
    cluster_owners: Mapping[str, WorkloadKey] = field(default_factory=dict)  # pod -> workload (--kubeconfig)
    evaluated_by_prometheus: dict[str, str] = field(default_factory=dict)  # rule -> why not here (local.py)

    @property
    def pods(self) -> list[str]:
        """The pods whose containers held or used GPUs in the window."""
        return sorted({s.labels.get("pod", "") for name in (ex.GPUS, ex.UTILIZATION)
                       for s in self.series.get(name, ())})


def namespaces_expr(expressions: Expressions, lookback: timedelta) -> str:
    """The namespaces whose workloads dcgm-exporter reported within `lookback` (one instant query)."""
    window = f"[{_seconds(lookback)}s]"
    both = f"last_over_time({FB_MIB}{window}) or last_over_time(DCGM_FI_DEV_GPU_UTIL{{m}}{window})"
    raw = expressions.raw(both, None)
    return f"group by (namespace) ({raw})"


@dataclass(frozen=True, slots=True)
class _Query:
    namespace: str
    slot: str  # "alert:<i>", "leaf:<key>", a series name, "fb_mib", "quota", "limit_range" or "owner:<key>"
    expr: str
    instant: bool = False
    piece: Window | None = None  # a leaf's: the piece of the widened window it is asked for (local.py)


def _queries(expressions: Expressions, ns: str, window: Window, gpu_resource: str, plan: Plan) -> list[_Query]:
    lookback = f"{_seconds(window.end - window.start + window.step)}s"
    # The leaves first, piece by piece (each piece is evaluated once all its leaves are in: blocks.py).
    found = [_Query(ns, f"leaf:{key}", text, piece=piece) for piece in leaf_pieces(window, plan.lead)
             for key, text in plan.queries.items()]
    found += [_Query(ns, f"alert:{i}", rule.expr) for i, rule in enumerate(expressions.alerts(ns))
              if i in plan.refused]
    found += [_Query(ns, name, expressions.series(name, ns)) for name in SERIES if name not in plan.trees]
    found += [_Query(ns, "fb_mib", expressions.raw(FB_MIB, ns)),
              _Query(ns, "quota", QUOTA.format(ns=ns, gpu=gpu_resource)),
              _Query(ns, "limit_range", LIMIT_RANGE.format(ns=ns, gpu=gpu_resource))]
    owners = (("pod", POD_OWNER), ("replicaset", RS_OWNER), ("job", JOB_OWNER), ("priority", POD_PRIORITY))
    return found + [_Query(ns, f"owner:{key}", t.format(ns=ns, w=lookback), instant=True) for key, t in owners]


def leaf_pieces(window: Window, lead: int) -> list[Window]:
    """The pieces of the window widened by `lead` steps the leaves are asked for in (LEAN_PIECE_STEPS each)."""
    widened, found = window.widened(lead), []
    start = widened.start
    while start <= widened.end:
        end = min(widened.end, start + widened.step * (LEAN_PIECE_STEPS - 1))
        found.append(Window(start, end, widened.step))
        start = end + widened.step
    return found


def collect(source: RangeSource, expressions: Expressions, namespaces: Sequence[str], window: Window, *,
            gpu_resource: str, concurrency: int = 4, progress: Callable[[int, int], None] | None = None,
            evaluate_locally: bool = True) -> list[NamespaceData]:
    """Every query of every namespace, at most `concurrency` at once; `SourceUnavailable` from any fails all.

    `evaluate_locally`: the rules evaluated here over Prometheus's answers for the parts of them that read no
    recorded series, each asked for once (local.py), a piece of the window at a time as the answers come
    (blocks.py), but for a rule the evaluator does not know; else every rule inlined and evaluated by Prometheus.
    """
    found: dict[str, NamespaceData] = {}
    plans: dict[str, tuple[Expressions, Plan]] = {}
    streams: dict[str, blocks.Stream] = {}
    queries: list[_Query] = []
    for ns in namespaces:
        mine = expressions if shares_gpus(source, expressions, ns, window) else expressions.without_sharing()
        rules = mine.alerts(ns)
        found[ns] = NamespaceData(ns, alerts=[(rule, ()) for rule in rules])
        plan = (local.plan(mine, rules, window.step, ns, series=SERIES) if evaluate_locally
                else local.Plan(refused=dict.fromkeys(range(len(rules)), "asked to")))
        plans[ns] = (mine, plan)
        if plan.trees:
            streams[ns] = _stream(plan, window)
            if not plan.queries:  # nothing to ask: the rules read only numbers and time()
                streams[ns].add({}, len(window.widened(plan.lead).grid))
        queries += _queries(mine, ns, window, gpu_resource, plan)
    pending: dict[str, dict[str, Frame]] = {ns: {} for ns in namespaces}
    step = window.step.total_seconds()

    def run(q: _Query) -> Sequence[Series] | Frame:
        if q.instant:
            return source.query(q.expr, window.end)
        if q.piece is not None:
            return Frame.of([source.query_range(q.expr, q.piece.start, q.piece.end, q.piece.step)],
                            q.piece.start.timestamp(), step, len(q.piece.grid))
        return _range(source, q.expr, window)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        # map answers in order: a piece's leaves all come before the next piece's.
        for done, (q, answer) in enumerate(zip(queries, pool.map(run, queries), strict=True), start=1):
            if isinstance(answer, Frame):
                piece = pending[q.namespace]
                piece[q.slot.removeprefix("leaf:")] = answer
                if len(piece) == len(plans[q.namespace][1].queries):
                    assert q.piece is not None
                    streams[q.namespace].add(piece, len(q.piece.grid))
                    pending[q.namespace] = {}
            else:
                _store(found[q.namespace], q.slot, answer)
            if progress is not None:
                progress(done, len(queries))
    for ns in namespaces:
        mine, plan = plans[ns]
        _answer(source, mine, plan, found[ns], streams.pop(ns, None), window)
    return [found[ns] for ns in namespaces]


def _stream(plan: Plan, window: Window) -> blocks.Stream:
    targets: dict[str, blocks.Target] = {f"series:{name}": _recorded(name) for name in SERIES}
    targets.update({f"alert:{i}": _evaluated(node) for i, node in plan.parsed.items()})
    return blocks.Stream(targets, trees=plan.trees, times=np.array(window.widened(plan.lead).grid), lead=plan.lead,
                         step=window.step.total_seconds())


def _answer(source: RangeSource, expressions: Expressions, plan: Plan, data: NamespaceData,
            stream: blocks.Stream | None, window: Window) -> None:
    """The alerts and the recorded per-container series the report reads besides, as `stream` evaluated them; one
    the answers made unevaluable here is asked of Prometheus."""
    data.evaluated_by_prometheus = {data.alerts[i][0].name: why for i, why in plan.refused.items()}
    if stream is None:
        return
    answers = stream.answers()
    for name in SERIES:
        answer = answers[f"series:{name}"]
        data.series[name] = (_range(source, expressions.series(name, data.namespace), window)
                             if isinstance(answer, Unsupported) else answer)
    for i in plan.parsed:
        rule, series = data.alerts[i][0], answers[f"alert:{i}"]
        if isinstance(series, Unsupported):
            data.evaluated_by_prometheus[rule.name] = str(series)
            series = _range(source, rule.expr, window)
        data.alerts[i] = (rule, series)


def _recorded(name: str) -> blocks.Target:
    return lambda evaluator: evaluator.recorded(name)


def _evaluated(node: Node) -> blocks.Target:
    return lambda evaluator: evaluator.evaluate(node)


def shares_gpus(source: RangeSource, expressions: Expressions, namespace: str, window: Window) -> bool:
    """Whether any GPU of `namespace` was held by more than one pod at an evaluation the queries read: the window
    widened by the farthest the rules' subqueries reach back. One query, far cheaper than the sharing clauses it
    spares every other query of the namespace where the answer is no."""
    steps = math.ceil(expressions.reach / window.step)
    return bool(_range(source, expressions.sharing_probe(namespace), window.widened(steps)))


def _store(data: NamespaceData, slot: str, answer: Sequence[Series]) -> None:
    kind, _, rest = slot.partition(":")
    if kind == "alert":
        data.alerts[int(rest)] = (data.alerts[int(rest)][0], answer)
    elif kind == "owner":
        data.owners[rest] = answer
    elif slot in ("fb_mib", "quota", "limit_range"):
        setattr(data, slot, answer)
    else:
        data.series[slot] = answer


def _pieces(source: RangeSource, expr: str, window: Window) -> Iterator[Sequence[Series]]:
    """One range query, split into pieces of at most PIECE_STEPS steps (LEAN_PIECE_STEPS without subqueries)."""
    start = window.start
    steps = PIECE_STEPS if _SUBQUERY.search(expr) else LEAN_PIECE_STEPS
    while start <= window.end:
        end = min(window.end, start + window.step * (min(steps, MAX_POINTS) - 1))
        yield source.query_range(expr, start, end, window.step)
        start = end + window.step


def _range(source: RangeSource, expr: str, window: Window) -> list[Series]:
    """One range query in pieces, the pieces' samples joined per series."""
    joined: dict[tuple[tuple[str, str], ...], Series] = {}
    for piece in _pieces(source, expr, window):
        for series in piece:
            key = tuple(sorted(series.labels.items()))
            found = joined.setdefault(key, Series(series.labels, array("d"), array("d")))
            found.times.extend(series.times)
            found.values.extend(series.values)
    # Most series answer at every evaluation: they share one array of the times (8 bytes a sample less).
    grid = array("d", window.grid)
    return [Series(s.labels, grid, s.values) if s.times == grid else s for s in joined.values()]


def _seconds(value: timedelta) -> int:
    return int(value.total_seconds())
