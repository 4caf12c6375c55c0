"""`reactor report` against a real Prometheus serving a generated history: its hours, GPU-hours and actions are
the ones worked out by hand below, and each decision is the one `reactor plan` takes on the same alerts."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from reactor.app.cli import main
from reactor.config.settings import load_settings
from reactor.sources.prometheus import PrometheusApi
from reactor.tools.report import expressions as ex
from reactor.tools.report import render_json
from reactor.tools.report.collect import Window, _range, shares_gpus
from reactor.tools.report.command import make_report
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.model import Grouping, Report, WorkloadReport
from reactor.tools.report.replay import envelope
from reactor.tools.report.source import PrometheusSource
from reactor.tools.rules import load_values
from tests.report import history
from tests.report.conftest import ROOT, History
from tests.report.history import END, GAP, T0

LOOKBACK = 300  # Prometheus's default lookback delta: a series is read until 5 minutes after its last sample
STEP = 60  # the report's step: the rules' evaluation interval (rules/thresholds.yaml), so `for` is exact


def _workload(report: Report, name: str) -> WorkloadReport:
    (found,) = [w for w in report.workloads if w.key.name == name]
    return found


def _grid() -> list[float]:
    return [T0.timestamp() + k * STEP for k in range(int((END - T0).total_seconds()) // STEP)]


def _present_points(pod: history.Pod) -> int:
    """Evaluations in [T0, END) that read one of the pod's samples: one within the lookback before it."""
    samples = [t for t in history.times(pod.start, pod.end if pod.end == END else pod.end - timedelta(seconds=30))
               if pod.shape.name != "gap" or not GAP[0].timestamp() <= t < GAP[1].timestamp()]
    return sum(1 for t in _grid() if any(t - LOOKBACK < s <= t for s in samples))


def test_gpu_hours_held_are_the_samples_prometheus_reads(served: History, report: Report) -> None:
    expected: dict[str, float] = {}
    for pod in served.pods:
        expected[pod.shape.name] = expected.get(pod.shape.name, 0.0) + pod.shape.gpus * _present_points(pod) / 60
    # By hand: 4 h of 1-minute evaluations are 240 points. The mover's first pod is read until 5 minutes after its
    # last sample (119.5 min → points 0-124), its successor from its first (125-239): 240 points, no overlap. The
    # gap's samples stop at 89.5 min and resume at 110: points 95-109 read nothing, 225 remain.
    assert expected == {"idle": 8.0, "under": 16.0, "saturated": 8.0, "bursty": 4.0, "migable": 4.0, "mover": 4.0,
                        "gap": 3.75, "trainer": 4.0}
    assert {w.key.name: round(w.gpu_hours, 6) for w in report.workloads} == expected


def test_hours_each_alert_would_have_fired(report: Report) -> None:
    # Constant utilization meets its condition from the first evaluation (T0), so each alert fires `for` later
    # (rules/thresholds.yaml: underutilized 30m, idle 1h, saturated 15m) and is still firing at the end (4 h).
    # The bursty one averages 1/3 over every 30-minute window (above 30 %) and at most 11/16 over 15 minutes
    # (below 95 %): no alert, although its median is 0. The gap's metrics vanish at 95 min (lookback), are missing
    # from then on (pending), fire 10 minutes later (105) and resolve when the samples return (110): 5 minutes.
    zero = {"idle": 0.0, "underutilized": 0.0, "saturated": 0.0, "memory-saturated": 0.0, "metrics-missing": 0.0}
    expected = {
        "idle": {**zero, "underutilized": 3.5, "idle": 3.0},
        "under": {**zero, "underutilized": 3.5},
        "saturated": {**zero, "saturated": 3.75},
        "migable": {**zero, "underutilized": 3.5},
        "bursty": zero, "mover": zero, "trainer": zero,
        "gap": {**zero, "metrics-missing": 5 / 60},
    }
    assert {w.key.name: {k: round(v, 6) for k, v in w.hours.items()} for w in report.workloads} == {
        name: {k: round(v, 6) for k, v in hours.items()} for name, hours in expected.items()}
    gap = _workload(report, "gap")
    (episode,) = gap.episodes
    assert (episode.alert, episode.active_at, episode.fired_at, episode.resolved_at) == (
        "GPUMetricsMissing", T0 + timedelta(minutes=95), T0 + timedelta(minutes=105), T0 + timedelta(minutes=110))


def test_actions_and_gpu_hours_released(report: Report) -> None:
    # By hand, with targetUtilization 0.6, a LimitRange of 1-4 GPUs and a quota of 13 holding 12:
    # 00:15 saturated (2 GPUs): scale-replicas-up needs 2 GPUs (the new replica), the quota has 1: refused.
    # 00:30 idle: ceil(2 × 0.0 / 0.6) = 0, raised to the LimitRange min 1: 2 → 1 (its surge pod needs the 1 free).
    # 00:30 migable: no cAdvisor series, so its alert says cpu_throttling "unknown", and cpu.unknownHolds (the
    #       default) keeps a possibly CPU-starved workload's GPUs: cpu-bound. The others' throttling is 0.000.
    # 00:30 under: ceil(4 × 0.2 / 0.6) = 2: 4 → 2 (its surge pod needs 2; idle's change left 2 free).
    # 01:00 idle: GPUIdle joins GPUUnderutilized; the fold keeps the underutilized firing, already applied.
    # Released: idle 1 GPU and under 2 GPUs from 00:30 to 04:00 (3.5 h): 3.5 and 7.0 GPU-hours.
    actions = {(w.key.name, d.at, d.strategy, d.from_value, d.to_value)
               for w in report.workloads for d in w.decisions if d.action is not None}
    at = T0 + timedelta(minutes=30)
    assert actions == {("idle", at, "resize-gpu-down", 2, 1), ("under", at, "resize-gpu-down", 4, 2)}
    skips = {(w.key.name, d.at - T0, d.reason) for w in report.workloads for d in w.decisions if d.action is None}
    assert skips == {("saturated", timedelta(minutes=15), "quota-exceeded"),
                     ("migable", timedelta(minutes=30), "cpu-bound"),
                     ("idle", timedelta(hours=1), "already-applied"),
                     ("gap", timedelta(minutes=105), "metrics-missing"),
                     ("gap", timedelta(minutes=110), "metrics-missing")}
    assert {w.key.name: (w.gpu_hours_released, w.gpu_hours_added) for w in report.workloads
            if w.gpu_hours_released or w.gpu_hours_added} == {"idle": (3.5, 0.0), "under": (7.0, 0.0)}


def test_trades_workloads_and_mig(served: History, report: Report) -> None:
    # The saturated workload was refused for its full quota while three workloads had GPUUnderutilized firing.
    # It needed 2 GPUs (one more replica of 2) and the quota had 1: 1 GPU short, in quota gpu-quota.
    assert sorted((t.receiver.name, t.donor.name, t.start - T0, t.hours, t.quota, t.gpus_short)
                  for t in report.trades) == [
        ("saturated", donor, timedelta(minutes=30), 3.5, "gpu-quota", 1) for donor in ("idle", "migable", "under")]
    assert {w.key.name: w.key.kind for w in report.workloads} == {
        n: "Deployment" for n in ("idle", "under", "saturated", "bursty", "migable", "mover", "gap", "trainer")}
    movers = sorted(p.name for p in served.pods if p.shape.name == "mover")
    assert len(movers) == 2 and _workload(report, "mover").pods == tuple(movers)
    assert _workload(report, "trainer").grouping is Grouping.POD_NAME
    assert _workload(report, "idle").grouping is Grouping.OWNER_SERIES
    # migable: peak 3,000 MiB × 1.2 = 3,600 ≤ 1/8 of 40 GiB (5,120 MiB); 10 % × 1.2 ≤ 1/7 of the SMs: 1g.5gb.
    # saturated (99 %) and bursty (100 % at its peak) need every SM; mover, gap and trainer at 50 % need
    # 60 % with headroom, above a 4g slice's 4/7 (57 %); idle and under hold several GPUs per pod (a slice is
    # part of one GPU).
    assert {w.key.name: w.mig.profile for w in report.workloads if w.mig} == {"migable": "1g.5gb"}
    bursty = _workload(report, "bursty")
    assert (bursty.utilization.p50, bursty.utilization.p95, bursty.utilization.max) == (0.0, 1.0, 1.0)


def test_the_json_validates_against_its_schema(report: Report) -> None:
    document = json.loads(render_json.render(report))
    jsonschema.Draft202012Validator.check_schema(render_json.schema())
    jsonschema.Draft202012Validator(render_json.schema(), format_checker=jsonschema.FormatChecker()).validate(document)
    assert document["summary"] == {"workloads": 8, "gpuHours": 51.75, "gpuHoursReleased": 10.5, "gpuHoursAdded": 0.0,
                                   "actions": 2}
    broken = {**document, "schemaVersion": "v0"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, render_json.schema())


def _headroom_before(report: Report, name: str, at: datetime) -> int:
    """The quota's headroom `name` met at `at`: the seeds' one, less the GPUs the report's earlier changes (in its
    order: time, then workload) took or gave back."""
    changed = sum(d.gpu_delta for w in report.workloads for d in w.decisions
                  if d.action is not None and (d.at, w.key.name) < (at, name))
    return history.QUOTA_HARD - sum(w.gpus for w in history.WORKLOADS) - changed


@pytest.mark.parametrize("name", ["saturated", "idle", "migable", "under", "gap"])
def test_each_first_decision_is_what_reactor_plan_decides(served: History, report: Report, name: str,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decision = _workload(report, name).decisions[0]
    notification = tmp_path / "notification.json"
    notification.write_text(json.dumps(envelope(decision.alerts)), encoding="utf-8")
    # The same cluster, its quota with the headroom the report's earlier changes left at that time.
    seeds = tmp_path / "seeds.yaml"
    hard = history.QUOTA_HARD + (_headroom_before(report, name, decision.at) - 1)
    seeds.write_text(served.seeds.read_text().replace(f'"{history.QUOTA_HARD}"', f'"{hard}"'), encoding="utf-8")
    assert main(["plan", "--alerts", str(notification), "--seed", str(seeds), "--config", str(served.policy),
                 "--output", "json"]) == 0
    (outcome,) = json.loads(capsys.readouterr().out)["outcomes"]
    planned = (outcome.get("action"), outcome.get("from"), outcome.get("to"), outcome.get("reason"))
    assert planned == (decision.action, decision.from_value, decision.to_value, decision.reason), outcome


def test_a_window_that_starts_mid_alert_sees_what_was_firing(served: History) -> None:
    """Enabled at 02:00, the reactor would hear at once of what fires then (a new route's group notifies what is
    active): the grid starts `for` early, so the alerts are firing at 02:00, not pending from it."""
    since = T0 + timedelta(hours=2)
    api = PrometheusApi(served.url, timeout=60, max_body_bytes=256 << 20)
    try:
        late = make_report(PrometheusSource(api), load_values(ROOT / "rules/thresholds.yaml"),
                           load_settings(str(served.policy)), since=since, until=END, step=timedelta(minutes=1))
    finally:
        api.close()
    idle = _workload(late, "idle")
    assert idle.hours["underutilized"] == 2.0 and idle.hours["idle"] == 2.0
    (first, *_) = idle.decisions
    assert (first.at, first.alert, first.strategy, first.from_value, first.to_value) == (
        since, "GPUUnderutilized", "resize-gpu-down", 2, 1)
    assert idle.gpu_hours == 4.0 and idle.gpu_hours_released == 2.0
    assert len(idle.timeline.times) == 121 and idle.timeline.times[0] == since.timestamp()  # 02:00 to 04:00


@pytest.mark.parametrize("step", [timedelta(minutes=1), timedelta(minutes=5)], ids=["1m", "5m"])
def test_leaving_out_the_sharing_clauses_changes_no_answer(served: History, step: timedelta) -> None:
    """Where no GPU is held by more than one pod, the rules without their sharing clauses answer as the rules do:
    every alert's and every series' matrix, sample for sample, from the real Prometheus."""
    expressions = Expressions(load_values(ROOT / "rules/thresholds.yaml"), resolution=step)
    lean = expressions.without_sharing()
    api = PrometheusApi(served.url, timeout=60, max_body_bytes=256 << 20)
    source = PrometheusSource(api)
    window = Window(T0 - timedelta(hours=1), END, step)
    try:
        for namespace in (history.NAMESPACE, history.OTHER_NAMESPACE):
            assert not shares_gpus(source, expressions, namespace, window)
            pairs = [(a.expr, b.expr) for a, b in zip(expressions.alerts(namespace), lean.alerts(namespace),
                                                      strict=True)]
            pairs += [(expressions.series(n, namespace), lean.series(n, namespace))
                      for n in (ex.UTILIZATION, ex.FB_USED, ex.GPUS, ex.IDLE_GPUS, ex.THROTTLING)]
            answered = 0
            for full, short in pairs:
                assert len(short) < len(full) * 0.7
                expected = sorted((tuple(sorted(s.labels.items())), s.samples) for s in _range(source, full, window))
                assert sorted((tuple(sorted(s.labels.items())), s.samples)
                              for s in _range(source, short, window)) == expected
                answered += len(expected)
            assert answered > 0
    finally:
        api.close()
