"""The alerting rules evaluated by the report over the recorded series asked for once each give what a real
Prometheus 2.42 gives for the same rules inlined: every alert's matrix and every per-container series, sample for
sample, on one history holding every case the report meets — idle, underutilized, saturated, bursty, MIG-able,
a pod moved to another node, a scrape gap, a GPU two pods share, a CPU-throttled container, one near its memory
limit, one whose framebuffer is full, and a namespace with its own thresholds — at the rules' evaluation interval
and at a coarser step, over a window that begins before the history and ends after it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from reactor.sources.prometheus import PrometheusApi
from reactor.tools.report import collect as collect_module
from reactor.tools.report.collect import NamespaceData, Window, collect
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.source import PrometheusSource, RangeSource, Series
from reactor.tools.rules import load_values
from reactor.tools.rules.values import Values
from tests.report import history
from tests.report.conftest import serve_history
from tests.report.history import END, NAMESPACE, OTHER_NAMESPACE, T0, Family, Pod, Shape, _text, times
from tests.report.test_report_sharing import _history as _sharing_history

ROOT = Path(__file__).parents[2]
CPU = "cpu"  # the cAdvisor cases: throttled, near its memory limit, its framebuffer full
RESEARCH = "ml-research"  # rules/thresholds.yaml gives it GPUIdle thresholds of its own (1 % for 2 h)
NAMESPACES = (NAMESPACE, OTHER_NAMESPACE, CPU, RESEARCH, "sliced", "whole")
LIMIT_BYTES = 8 << 30
EXTRA = (Shape("starved", 1, lambda t: 0.1, namespace=CPU), Shape("nearoom", 1, lambda t: 0.5, namespace=CPU),
         Shape("fbfull", 1, lambda t: 0.7, fb_mib=40000, namespace=CPU),
         Shape("notebook", 1, lambda t: 0.015, namespace=RESEARCH), Shape("parked", 1, lambda t: 0.005,
                                                                           namespace=RESEARCH))
THROTTLED = {"starved": 0.4, "nearoom": 0.0, "fbfull": 0.0}  # share of CFS periods throttled
WORKING_SET = {"starved": 0.5, "nearoom": 0.95, "fbfull": 0.5}  # of the memory limit


def _pods() -> list[Pod]:
    """The pods as history.pods_of names them from the cluster's (ReplicaSet `<name>-5d4c7b9f8`), the mover
    ending on node-a and coming back on node-b, and the extra namespaces' pods."""
    found = []
    for i, shape in enumerate((*history.WORKLOADS, *EXTRA)):
        replicaset = f"{shape.name}-5d4c7b9f8"
        if shape.name == "mover":
            found.append(Pod(shape, f"{replicaset}-b2c4d", replicaset, "node-a", end=history.MOVE_AT))
            found.append(Pod(shape, f"{replicaset}-zz9zz", replicaset, "node-b", start=history.MOVED_START))
        else:
            found.append(Pod(shape, f"{replicaset}-x{i}k4d", replicaset, "node-a" if i % 2 else "node-b"))
    return [*found, Pod(history.LAB, "trainer-5f6d7b8c9d-xw2kq", "trainer-5f6d7b8c9d", "node-c")]


def _cadvisor(pods: list[Pod]) -> str:
    """The kubelet's cAdvisor series of the `cpu` namespace's containers (100 ms CFS periods, a share throttled;
    working set and limit), as cAdvisor labels them (namespace, pod, container)."""
    names = ("container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
             "container_memory_working_set_bytes", "container_spec_memory_limit_bytes")
    families = {n: Family(n) for n in names}
    for pod in pods:
        if pod.shape.namespace != CPU:
            continue
        labels = {"job": "kubelet", "metrics_path": "/metrics/cadvisor", "instance": pod.node,
                  "namespace": CPU, "pod": pod.name, "container": "main"}
        for t in times(pod.start, pod.end):
            elapsed = t - pod.start.timestamp()
            families[names[0]].add(labels, t, 10 * elapsed)
            families[names[1]].add(labels, t, round(10 * elapsed * THROTTLED[pod.shape.name]))
            families[names[2]].add(labels, t, WORKING_SET[pod.shape.name] * LIMIT_BYTES)
            families[names[3]].add(labels, t, LIMIT_BYTES)
    return _text(families.values())


def _joined(*texts: str) -> str:
    """OpenMetrics texts as one: each family's series under one TYPE line, one EOF."""
    sections: dict[str, list[str]] = {}
    for text in texts:
        current: list[str] = []
        for line in text.splitlines():
            if line.startswith("# TYPE"):
                current = sections.setdefault(line, [])
            elif line != "# EOF":
                current.append(line)
    return "\n".join(line for head, lines in sections.items() for line in (head, *lines)) + "\n# EOF\n"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pods = _pods()
    text = _joined(history.openmetrics(pods), _cadvisor(pods), _sharing_history())
    with serve_history(tmp_path_factory.mktemp("report-local"), text) as served:
        yield served


class Counted:
    """The report's source, counting the range queries whose text holds a word."""

    def __init__(self, inner: RangeSource) -> None:
        self.inner = inner
        self.asked: list[str] = []

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> Sequence[Series]:
        self.asked.append(expr)
        return self.inner.query_range(expr, start, end, step)

    def query(self, expr: str, at: datetime | None = None) -> Sequence[Series]:
        return self.inner.query(expr, at)


def _matrix(series: Sequence[Series]) -> list[tuple[tuple[tuple[str, str], ...], tuple[tuple[float, str], ...]]]:
    """A matrix comparable sample for sample, NaN equal to NaN (GPUMetricsMissing's value where none was seen)."""
    return sorted((tuple(sorted(s.labels.items())),
                   tuple((t, "NaN" if math.isnan(v) else repr(v)) for t, v in s.samples)) for s in series)


def _both(url: str, values: Values, namespace: str, step: timedelta) -> tuple[NamespaceData, NamespaceData, Counted]:
    expressions = Expressions(values, resolution=step)
    seconds = step.total_seconds()
    start = datetime.fromtimestamp(math.floor((T0 - timedelta(hours=1)).timestamp() / seconds) * seconds, T0.tzinfo)
    window = Window(start, END + timedelta(minutes=30), step)
    api = PrometheusApi(url, timeout=60, max_body_bytes=256 << 20)
    try:
        counted = Counted(PrometheusSource(api))
        (here,) = collect(counted, expressions, [namespace], window, gpu_resource="nvidia.com/gpu")
        (inlined,) = collect(PrometheusSource(api), expressions, [namespace], window, gpu_resource="nvidia.com/gpu",
                             evaluate_locally=False)
    finally:
        api.close()
    return here, inlined, counted


STEPS = {"1m": timedelta(minutes=1), "5m": timedelta(minutes=5)}


@pytest.fixture(scope="module")
def compared(url: str) -> dict[tuple[str, str], tuple[NamespaceData, NamespaceData, Counted]]:
    """Each namespace at each step, collected both ways."""
    values = load_values(ROOT / "rules/thresholds.yaml")
    return {(namespace, step): _both(url, values, namespace, STEPS[step]) for namespace in NAMESPACES
            for step in STEPS}


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_alert_and_series_is_prometheus_own(compared: dict[tuple[str, str], tuple[NamespaceData,
                                                                                        NamespaceData, Counted]],
                                                  namespace: str, step: str) -> None:
    here, inlined, counted = compared[namespace, step]
    assert here.evaluated_by_prometheus == {}
    assert [r.name for r, _ in here.alerts] == [r.name for r, _ in inlined.alerts]
    for (rule, mine), (_, theirs) in zip(here.alerts, inlined.alerts, strict=True):
        assert _matrix(mine) == _matrix(theirs), rule.name
    assert set(here.series) == set(inlined.series)
    for name, series in inlined.series.items():
        assert _matrix(here.series[name]) == _matrix(series), name
    # No alert was asked of Prometheus: each recorded series it reads once (in day pieces), the others as before.
    assert not any(rule.expr in counted.asked for rule, _ in here.alerts)


def test_every_rule_was_compared_where_it_fires(
        compared: dict[tuple[str, str], tuple[NamespaceData, NamespaceData, Counted]]) -> None:
    """The comparisons above are not of empty answers: every alerting rule (and the namespace's own GPUIdle) fired
    in some namespace of the history, at both steps."""
    for step in STEPS:
        fired: dict[str, set[str]] = {}
        for namespace in NAMESPACES:
            _, inlined, _ = compared[namespace, step]
            for rule, theirs in inlined.alerts:
                variant = f" {rule.labels['thresholds']}" if "thresholds" in rule.labels else ""
                if theirs:
                    fired.setdefault(rule.name + variant, set()).add(namespace)
        assert set(fired) == {"GPUUnderutilized", "GPUIdle", "GPUIdle namespaces.ml-research", "GPUSaturated",
                              "GPUMemorySaturated", "GPUMetricsMissing", "GPUStarvedByCPU",
                              "GPUContainerNearMemoryLimit"}, (step, fired)
        assert fired["GPUStarvedByCPU"] == {CPU} and fired["GPUContainerNearMemoryLimit"] == {CPU}
        assert "sliced" in fired["GPUMetricsMissing"]  # a shared GPU's pods: utilization unknown, held
        # ml-research's own GPUIdle (1 %) judges its pods: the one at 1.5 %, idle by the default 2 %, is not idle.
        _, research, _ = compared[RESEARCH, step]
        (idle,) = [answer for rule, answer in research.alerts if rule.name == "GPUIdle"]
        assert {s.labels["pod"].split("-")[0] for s in idle} == {"parked"}


def test_pieces_of_time_join_without_a_seam(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked for and evaluated 7 steps at a time (6 hours at a time at scale), the answers are the same: the ranges
    read back across the pieces before (2 hours, many pieces), the pieces join per series."""
    monkeypatch.setattr(collect_module, "LEAN_PIECE_STEPS", 7)
    here, inlined, _ = _both(url, load_values(ROOT / "rules/thresholds.yaml"), NAMESPACE, timedelta(minutes=1))
    for (rule, mine), (_, theirs) in zip(here.alerts, inlined.alerts, strict=True):
        assert _matrix(mine) == _matrix(theirs), rule.name
    for name, series in inlined.series.items():
        assert _matrix(here.series[name]) == _matrix(series), name


def test_a_rule_the_evaluator_does_not_know_is_asked_of_prometheus(url: str) -> None:
    """With kube-state-metrics, GPUMetricsMissing reads `kube_pod_info`, which no recording rule records: that rule
    is asked of Prometheus inlined, as before, and says so; its answer is Prometheus's own, and the others stay
    evaluated here."""
    values = dataclasses.replace(load_values(ROOT / "rules/thresholds.yaml"), kube_state_metrics=True)
    here, inlined, counted = _both(url, values, NAMESPACE, timedelta(minutes=1))
    assert set(here.evaluated_by_prometheus) == {"GPUMetricsMissing"}
    assert "kube_pod_info" in here.evaluated_by_prometheus["GPUMetricsMissing"]
    for (rule, mine), (_, theirs) in zip(here.alerts, inlined.alerts, strict=True):
        assert _matrix(mine) == _matrix(theirs), rule.name
        assert (rule.expr in counted.asked) is (rule.name == "GPUMetricsMissing")
    assert any(theirs for rule, theirs in inlined.alerts if rule.name == "GPUMetricsMissing")
