"""The report's pure parts: Prometheus's alert state machine, Alertmanager's fingerprint, the MIG table, the
inlined expressions, the step, the grouping by name."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reactor.tools.report.collect import Window, collect
from reactor.tools.report.command import _progress, choose_step
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.firing import Firing, episodes
from reactor.tools.report.mig import smallest_fit
from reactor.tools.report.owners import by_name
from reactor.tools.report.replay import fingerprint
from reactor.tools.report.source import Series, read_matrix
from reactor.tools.rules import load_values, promql
from reactor.tools.rules.values import build_values

ROOT = Path(__file__).parents[2]
GRID = [float(t) for t in range(0, 600, 60)]  # ten evaluations, one a minute


def _at(*minutes: int, value: float = 0.5) -> list[tuple[float, float]]:
    return [(m * 60.0, value) for m in minutes]


@pytest.mark.parametrize(("samples", "hold", "keep", "expected"), [
    pytest.param(_at(0, 1, 2, 3), 120, 0, [Firing(0, 120, 240, 0.5)], id="fires-after-for-resolves-when-gone"),
    pytest.param(_at(0, 1), 120, 0, [], id="pending-that-disappears-never-fires"),
    pytest.param(_at(*range(10)), 0, 0, [Firing(0, 0, None, 0.5)], id="for-0-fires-at-once-still-firing"),
    pytest.param(_at(0, 1, 2, 4, 5, 6), 120, 0, [Firing(0, 120, 180, 0.5), Firing(240, 360, 420, 0.5)],
                 id="a-gap-resolves-then-a-new-episode"),
    # Absent at 3 (kept), back at 4-6, absent from 7: kept while under 2 minutes since 7, resolved at 9.
    pytest.param(_at(0, 1, 2, 4, 5, 6), 120, 120, [Firing(0, 120, 540, 0.5)], id="keep-firing-for-rides-the-gap"),
    pytest.param(_at(0, 1, 2), 60, 120, [Firing(0, 60, 300, 0.5)], id="keep-firing-for-after-the-last-sample"),
])
def test_firing_replays_prometheus_alert_states(samples: list[tuple[float, float]], hold: float, keep: float,
                                                expected: list[Firing]) -> None:
    assert episodes(samples, GRID, hold=hold, keep=keep) == expected


def test_the_value_is_the_expressions_value_when_it_fired() -> None:
    samples = [(0.0, 0.1), (60.0, 0.2), (120.0, 0.3)]
    assert episodes(samples, GRID, hold=60, keep=0)[0].value == 0.2


@pytest.mark.parametrize("sample", sorted((ROOT / "tests/samples").glob("am-0.25-*.json")), ids=lambda p: p.name)
def test_fingerprints_are_alertmanagers(sample: Path) -> None:
    for alert in json.loads(sample.read_text())["alerts"]:
        assert fingerprint(alert["labels"]) == alert["fingerprint"]


@pytest.mark.parametrize(("model", "fb_mib", "busy", "profile"), [
    ("NVIDIA A100-SXM4-40GB", 3000, 0.10, "1g.5gb"),
    ("NVIDIA A100-SXM4-40GB", 6000, 0.10, "1g.10gb"),  # memory of 2/8, SMs of 1/7
    ("NVIDIA A100-SXM4-40GB", 6000, 0.20, "2g.10gb"),
    ("NVIDIA A100-SXM4-40GB", 15000, 0.45, "4g.20gb"),  # 54 % with headroom: more than 3/7, at most 4/7
    ("NVIDIA A100-SXM4-40GB", 15000, 0.70, None),  # 84 % with headroom: only the whole GPU
    ("NVIDIA A100 80GB PCIe", 8000, 0.10, "1g.10gb"),
    ("NVIDIA A100 80GB PCIe", 9000, 0.10, "1g.20gb"),  # 10,800 MiB with headroom: above 1/8 of 80 GiB
    ("NVIDIA H100 80GB HBM3", 30000, 0.30, "3g.40gb"),
    ("NVIDIA H200", 15000, 0.10, "1g.18gb"),
    ("NVIDIA H200", 40000, 0.10, "3g.71gb"),
    ("Tesla T4", 1000, 0.01, None),  # no MIG
])
def test_the_smallest_mig_profile_that_holds_the_peaks(model: str, fb_mib: float, busy: float,
                                                       profile: str | None) -> None:
    fit = smallest_fit(model, peak_fb_mib=fb_mib, peak_utilization=busy)
    assert (fit.profile if fit else None) == profile


def test_every_recorded_series_is_inlined_and_narrowed() -> None:
    expressions = Expressions(load_values(ROOT / "rules/thresholds.yaml"))
    alerts = expressions.alerts("ml")
    assert {a.name for a in alerts} >= {"GPUIdle", "GPUUnderutilized", "GPUSaturated", "GPUMetricsMissing"}
    for a in alerts:
        assert "gpu_reactor:" not in a.expr, a.name
        assert 'exported_pod!=""' not in a.expr.replace('exported_pod!="", exported_namespace="ml"', ""), a.name
    # The namespace override of rules/thresholds.yaml (idle in ml-research): its own rule judges ml-research, the
    # default one (which excludes it, as the rendered rules do) every other namespace; no query for the other.
    (idle,) = [a for a in alerts if a.name == "GPUIdle"]
    assert idle.for_ == timedelta(hours=1)
    assert 'unless on (namespace) (label_replace(vector(1), "namespace", "ml-research"' in idle.expr
    (research,) = [a for a in expressions.alerts("ml-research") if a.name == "GPUIdle"]
    assert research.for_ == timedelta(hours=2) and research.labels["thresholds"] == "namespaces.ml-research"
    assert expressions.longest_for == timedelta(hours=2)


def test_a_coarser_step_samples_the_windows_at_that_step() -> None:
    values = load_values(ROOT / "rules/thresholds.yaml")
    fine = Expressions(values).alerts("ml")[0].expr
    coarse = Expressions(values, resolution=timedelta(minutes=5)).alerts("ml")[0].expr
    assert "[30m:1m]" in fine and "[30m:5m]" in coarse and "[30m:1m]" not in coarse


@pytest.mark.parametrize(("span", "step"), [(timedelta(days=7), timedelta(minutes=5)),
                                            (timedelta(hours=4), timedelta(minutes=1)),
                                            (timedelta(days=30), timedelta(minutes=22))])
def test_the_step_follows_the_window(span: timedelta, step: timedelta) -> None:
    assert choose_step(None, build_values({}), span) == step


@pytest.mark.parametrize(("pod", "kind", "name"), [
    ("llm-inference-7d9f8c6b5-x2k4p", "Deployment", "llm-inference"),
    ("trainer-0", "StatefulSet", "trainer"),
    ("debug", "Pod", "debug"),
])
def test_grouping_by_name_guesses_the_controller(pod: str, kind: str, name: str) -> None:
    key = by_name("ns", pod)
    assert (key.kind, key.name) == (kind, name)


def test_progress_for_a_long_window_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert _progress(timedelta(hours=4)) is None  # a short window, not on a terminal: quiet
    show = _progress(timedelta(days=7))
    assert show is not None
    for done in range(1, 21):
        show(done, 20)
    out, err = capsys.readouterr()
    # One line per tenth of the namespaces (the first as soon as one is done).
    assert out == "" and err.splitlines() == [f"reactor report: {n}/20 namespaces" for n in (1, *range(2, 21, 2))]


def test_the_policy_files_confirm_settings_name_the_prometheus_and_the_flags_win(tmp_path: Path) -> None:
    """`reactor report --config policy.yaml` reads the Prometheus the confirm step asks (confirm.prometheusUrl,
    tokenFile, timeout as a floor of a range query's); --prometheus-url and --token-file win."""
    import argparse

    from reactor.config.settings import load_settings
    from reactor.tools.report.arguments import add_arguments
    from reactor.tools.report.command import DEFAULT_TIMEOUT, _api

    token = tmp_path / "token"
    token.write_text("t0ken\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text("namespaces: {allow: [ml]}\nconfirm: {prometheusUrl: 'http://prom.monitoring:9090', "
                      f"tokenFile: '{token}', timeout: 2s}}\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = load_settings(str(policy), {})
    from_policy = _api(parser.parse_args([]), settings)
    assert from_policy.url == "http://prom.monitoring:9090" and from_policy.timeout == DEFAULT_TIMEOUT.total_seconds()
    flagged = _api(parser.parse_args(["--prometheus-url", "http://127.0.0.1:9090"]), settings)
    assert flagged.url == "http://127.0.0.1:9090"
    from_policy.close()
    flagged.close()


class _Recording:
    """A `RangeSource` (source.py) that records what is asked and answers only the sharing probe, with `shared`."""

    def __init__(self, probe: str, shared: bool) -> None:
        self.probe, self.shared = probe, shared
        self.asked: list[str] = []

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> list[Series]:
        self.asked.append(expr)
        if expr == self.probe and self.shared:
            return [Series.of({"UUID": "GPU-1", "GPU_I_ID": ""}, ((start.timestamp(), 2.0),))]
        return []

    def query(self, expr: str, at: datetime | None = None) -> list[Series]:
        self.asked.append(expr)
        return []


@pytest.mark.parametrize("shared", [True, False], ids=["a-shared-gpu-keeps-the-rules-whole", "none-shared-lean"])
def test_the_sharing_probe_chooses_the_expressions(shared: bool) -> None:
    expressions = Expressions(load_values(ROOT / "rules/thresholds.yaml"), resolution=timedelta(minutes=5))
    source = _Recording(expressions.sharing_probe("ml"), shared)
    end = datetime(2026, 11, 9, tzinfo=UTC)
    (data,) = collect(source, expressions, ["ml"], Window(end - timedelta(days=1), end, timedelta(minutes=5)),
                      gpu_resource="nvidia.com/gpu", concurrency=1)
    assert source.asked[0] == source.probe
    chosen = expressions if shared else expressions.without_sharing()
    assert [rule.expr for rule, _ in data.alerts] == [rule.expr for rule in chosen.alerts("ml")]
    others = [e for e in source.asked if e != source.probe]
    assert any(promql.gpu_pods().split(" (group")[0] in e for e in others) is shared  # count by (UUID, …
    assert expressions.reach == timedelta(hours=2)  # 1h + 30m + 15m + 10m + 5m: the rules' ranges, summed


def test_a_matrix_is_read_into_arrays_and_a_bad_one_refused() -> None:
    """The report's own reader of a range query (reactor/tools/report/source.py): values as Prometheus prints them,
    NaN and infinities included; anything else is an invalid answer (the client makes it PrometheusUnavailable)."""
    (series,) = read_matrix({"resultType": "matrix", "result": [
        {"metric": {"pod": "a"}, "values": [[1700000000, "0.25"], [1700000060.5, "NaN"], [1700000120, "+Inf"]]}]})
    assert dict(series.labels) == {"pod": "a"} and list(series.times) == [1700000000, 1700000060.5, 1700000120]
    assert series.values[0] == 0.25 and math.isnan(series.values[1]) and series.values[2] == math.inf
    for bad in ({"resultType": "vector", "result": []}, {"resultType": "matrix", "result": [{"metric": {"a": 1}}]},
                {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "x"]]}]}):
        with pytest.raises((ValueError, TypeError, KeyError)):
            read_matrix(bad)
