"""What the report evaluates itself and what it leaves to Prometheus: every rendered rule is taken at the rules'
interval and coarser; a finer step, or an expression the evaluator does not know, goes to Prometheus with the
reason in the report's notes. (tests/report/test_report_local.py compares the answers with a real Prometheus.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from reactor.config.settings import build_settings
from reactor.tools.report import local
from reactor.tools.report.collect import SERIES
from reactor.tools.report.command import make_report
from reactor.tools.report.evaluation import Evaluator
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.frames import Frame
from reactor.tools.report.source import Series
from reactor.tools.report.syntax import Unsupported, parse
from reactor.tools.rules import load_values

ROOT = Path(__file__).parents[2]
VALUES = load_values(ROOT / "rules/thresholds.yaml")


@pytest.mark.parametrize("step", [timedelta(minutes=1), timedelta(minutes=5)], ids=["interval", "coarser"])
@pytest.mark.parametrize("shared", [True, False], ids=["sharing-clauses", "no-sharing"])
def test_every_rendered_rule_is_evaluated_here(step: timedelta, shared: bool) -> None:
    expressions = Expressions(VALUES, resolution=step)
    variant = expressions if shared else expressions.without_sharing()
    for namespace in ("ml", "ml-research"):
        plan = local.plan(variant, variant.alerts(namespace), step, namespace, series=SERIES)
        assert plan.refused == {} and len(plan.parsed) == len(variant.alerts(namespace))
        # Only the utilization per container (an `avg by`) is asked for whole; the rest from its raw parts.
        assert [name for name, tree in plan.trees.items() if tree is None] == [
            "gpu_reactor:container_gpu_utilization:ratio"]
        assert plan.lead == expressions.reach / step
        assert all(f'namespace="{namespace}"' in text or "vector(1)" in text or "UUID" in text
                   for text in plan.queries.values())


def test_a_step_finer_than_the_rules_interval_is_left_to_prometheus() -> None:
    step = timedelta(seconds=30)
    expressions = Expressions(VALUES, resolution=step)
    plan = local.plan(expressions, expressions.alerts("ml"), step, "ml", series=SERIES)
    assert plan.parsed == {} and not plan.trees and set(plan.refused) == set(range(len(expressions.alerts("ml"))))
    assert "finer than the rules' evaluation interval" in plan.refused[0]


@pytest.mark.parametrize(("expr", "why"), [
    ("quantile_over_time(0.9, gpu_reactor:container_gpu_utilization:ratio[30m]) > 0.5", "quantile_over_time"),
    ("rate(gpu_reactor:container_gpu_utilization:ratio[30m]) > 0.5", "function rate"),
    ("sum without (pod) (gpu_reactor:container_gpus:count) > 1", "without"),
    ("gpu_reactor:container_gpus:count > ignoring (pod) gpu_reactor:container_gpus:count", "ignoring"),
    ("avg_over_time(gpu_reactor:container_gpu_utilization:ratio[30m:1m]) < 0.3", "subquery"),
    ("avg_over_time(kube_pod_info[30m]) < 0.3", "which no recording rule records"),
], ids=["two-arguments", "rate", "without", "ignoring", "subquery", "raw-series"])
def test_an_expression_the_evaluator_does_not_know_is_refused_with_why(expr: str, why: str) -> None:
    step = timedelta(minutes=1)
    expressions = Expressions(VALUES, resolution=step)
    rules = [dataclasses.replace(expressions.alerts("ml")[0], rule_expr=expr)]
    plan = local.plan(expressions, rules, step, "ml")
    assert plan.parsed == {} and why in plan.refused[0]


def test_the_running_mean_is_prometheus_own() -> None:
    """avg_over_time of 0,0,0,0,1,1,0 is 0.2857142857142857 in Prometheus 2.42 (its compensated running mean; a plain
    running mean gives 0.28571428571428575): the value a 30-minute window of the bursty history reads at 5 minutes."""
    values = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    name = "gpu_reactor:container_gpu_utilization:ratio"
    frame = Frame([{"pod": "a"}], np.array([values]), np.ones((1, 7), dtype=bool))
    times = np.arange(7, dtype=np.float64) * 300
    evaluator = Evaluator(trees={name: None}, leaves={f"recorded:{name}": frame}, times=times, step=300.0)
    mean = evaluator.evaluate(parse(f"avg_over_time({name}[30m])"))
    assert mean.values[0, 6] == 0.2857142857142857 and mean.present[0].all()
    with pytest.raises(Unsupported, match="avg"):
        evaluator.evaluate(parse(f"avg by (pod) ({name})"))


class Nothing:
    """A Prometheus that has no series at all."""

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> Sequence[Series]:
        return []

    def query(self, expr: str, at: datetime | None = None) -> Sequence[Series]:
        return []


def test_the_report_says_which_rule_prometheus_evaluated() -> None:
    values = dataclasses.replace(VALUES, kube_state_metrics=True)
    until = datetime(2026, 11, 9, tzinfo=UTC)
    report = make_report(Nothing(), values, build_settings({"namespaces": {"allow": ["ml"]}}, {}),
                         since=until - timedelta(hours=6), until=until, step=timedelta(minutes=1), namespaces=["ml"])
    (note,) = [n for n in report.notes if n.startswith("evaluated by Prometheus")]
    assert "GPUMetricsMissing" in note and "kube_pod_info" in note and "GPUIdle" not in note
