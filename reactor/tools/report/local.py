"""Which alerting rules the report evaluates itself, and which recorded series it asks Prometheus for to do so.

Pure. Inlined, every alert made Prometheus evaluate the recorded series it reads again (utilization in most,
several of them nested in GPUMetricsMissing): most of a report's time. Here each recorded series an alert reads is
asked for once per namespace, on the report's grid widened backwards by the longest range an alert reads, and the
alerts are evaluated over those answers (evaluation.py). That gives Prometheus's answers sample for sample only
where the subqueries sample the series at the report's own grid: the step must be the resolution the rules are
inlined at (`Expressions.interval`), which it is whenever the step is the rules' evaluation interval or coarser.
A rule whose expression the evaluator does not know is left to Prometheus, with the reason: `Plan.refused`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from reactor.tools.report.evaluation import Evaluator, Frame
from reactor.tools.report.expressions import AlertRule, Expressions
from reactor.tools.report.source import Series
from reactor.tools.report.syntax import Node, Unsupported, parse, ranges, selected


@dataclass(frozen=True, slots=True)
class Plan:
    """For one namespace's rules: the trees evaluated here (by the rule's index), the rules left to Prometheus with
    why, the recorded series to ask for, and how many steps before the window they are asked from."""

    parsed: Mapping[int, Node] = field(default_factory=dict)
    refused: Mapping[int, str] = field(default_factory=dict)
    recorded: tuple[str, ...] = ()
    lead: int = 0


def plan(expressions: Expressions, rules: Sequence[AlertRule], step: timedelta) -> Plan:
    """What of `rules` is evaluated here at `step` (see the module's docstring)."""
    if expressions.interval != step:
        why = (f"the step {step} is finer than the rules' evaluation interval {expressions.interval}, "
               "at which the recorded series are sampled")
        return Plan(refused=dict.fromkeys(range(len(rules)), why))
    parsed: dict[int, Node] = {}
    refused: dict[int, str] = {}
    for i, rule in enumerate(rules):
        try:
            node = parse(rule.rule_expr)
            unknown = selected(node) - expressions.recorded
            if unknown:
                raise Unsupported(f"it reads {', '.join(sorted(unknown))}, which no recording rule records")
            _try(node, step)
        except Unsupported as e:
            refused[i] = str(e)
            continue
        parsed[i] = node
    reach = max((r for node in parsed.values() for r in ranges(node)), default=timedelta(0))
    names = sorted({name for node in parsed.values() for name in selected(node)})
    return Plan(parsed, refused, tuple(names), math.ceil(reach / step))


def _try(node: Node, step: timedelta) -> None:
    """Evaluate `node` over no series, so an expression the evaluator cannot take is refused before any query."""
    reach = max(ranges(node), default=timedelta(0))
    lead = math.ceil(reach / step)
    nothing = {name: Frame.empty(lead + 1) for name in selected(node)}
    Evaluator(nothing, lead=lead, step=step.total_seconds()).evaluate(node)


def frames(answers: Mapping[str, Sequence[Series]], *, start: float, step: float, times: int) -> dict[str, Frame]:
    """The recorded series' answers (range queries from `start`, `times` evaluations `step` apart) as frames."""
    return {name: Frame.of(series, start, step, times) for name, series in answers.items()}


def evaluate(node: Node, recorded: Mapping[str, Frame], *, lead: int, step: float) -> Frame:
    """One rule's answer on the report's grid; `Unsupported` where the series make it one Prometheus would refuse
    or this evaluator cannot take (several right-hand samples matching one): ask Prometheus then."""
    return Evaluator(recorded, lead=lead, step=step).evaluate(node)
