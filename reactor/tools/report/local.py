"""Which rules the report evaluates itself, and what it asks Prometheus for to do so.

Pure. Inlined, every alert made Prometheus evaluate again each recorded series it reads (utilization in most,
several nested in GPUMetricsMissing), and each of those the raw series under it: most of a report's time. Here
the alerting rules, and the recording rules under them, are evaluated over Prometheus's answers for only the parts
that read no recorded series (the raw dcgm-exporter and cAdvisor selectors with their `label_replace`, `rate` and
ratios: the leaves), each asked for once per namespace over the window widened by the rules' `reach`. A recording
rule the evaluator cannot take exactly (an `avg by`, whose rounding follows an order a range query does not keep)
is asked for whole instead, as a leaf; an alerting rule it cannot take is left to Prometheus inlined, with the
reason (`Plan.refused`). Both give Prometheus's answers sample for sample only where the subqueries sample the
series on the report's own grid: the step must be the resolution the rules are inlined at (`Expressions.interval`),
which it is whenever the step is the rules' evaluation interval or coarser.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from reactor.tools.report.evaluation import Evaluator, leaves
from reactor.tools.report.expressions import AlertRule, Expressions
from reactor.tools.report.frames import Frame
from reactor.tools.report.syntax import Binary, Node, Unsupported, parse, selected


@dataclass(frozen=True, slots=True)
class Plan:
    """For one namespace's rules: the alerting rules' trees evaluated here (by the rule's index), those left to
    Prometheus with why, each recorded series' tree (None: asked for whole), the leaves' queries by key, and how
    many steps before the window everything is asked from."""

    parsed: Mapping[int, Node] = field(default_factory=dict)
    refused: Mapping[int, str] = field(default_factory=dict)
    trees: Mapping[str, Node | None] = field(default_factory=dict)
    queries: Mapping[str, str] = field(default_factory=dict)
    lead: int = 0


def plan(expressions: Expressions, rules: Sequence[AlertRule], step: timedelta, namespace: str, *,
         series: Iterable[str] = ()) -> Plan:
    """What of `rules` (and of the recorded `series` the report reads besides) is evaluated here at `step`."""
    if expressions.interval != step:
        why = (f"the step {step} is finer than the rules' evaluation interval {expressions.interval}, "
               "at which the recorded series are sampled")
        return Plan(refused=dict.fromkeys(range(len(rules)), why))
    lead = math.ceil(expressions.reach / step)
    trees: dict[str, Node | None] = {}
    for name in series:
        _resolve(expressions, name, trees, step, lead)
    parsed: dict[int, Node] = {}
    refused: dict[int, str] = {}
    for i, rule in enumerate(rules):
        try:
            node = parse(rule.rule_expr)
            unknown = selected(node) - expressions.recorded
            if unknown:
                raise Unsupported(f"it reads {', '.join(sorted(unknown))}, which no recording rule records")
            for name in selected(node):
                _resolve(expressions, name, trees, step, lead)
            _try(node, trees, step, lead)
        except Unsupported as e:
            refused[i] = str(e)
            continue
        parsed[i] = node
    queries = {f"recorded:{name}": expressions.series(name, namespace) for name, tree in trees.items() if tree is None}
    for tree in trees.values():
        if tree is not None:
            queries.update({leaf.source: expressions.narrow(leaf.source, namespace) for leaf in leaves(tree, trees)})
    return Plan(parsed, refused, trees, queries, lead)


def _resolve(expressions: Expressions, name: str, trees: dict[str, Node | None], step: timedelta,
             lead: int) -> None:
    """`name`'s tree, and those of the recorded series it reads, into `trees`; None where it is asked for whole."""
    if name in trees:
        return
    trees[name] = None  # while its own rules are read: a cycle asks for it whole
    try:
        nodes = [parse(text) for text in expressions.recording(name)]
        tree = nodes[0]
        for other in nodes[1:]:  # several rules recording one name record the union of their results
            tree = Binary("or", tree, other, source=f"({tree.source})\nor\n({other.source})")
        for read in sorted(selected(tree) & expressions.recorded):
            _resolve(expressions, read, trees, step, lead)
        _try(tree, trees, step, lead)
    except Unsupported:
        return
    trees[name] = tree


def _try(node: Node, trees: Mapping[str, Node | None], step: timedelta, lead: int) -> None:
    """Evaluate `node` over no series, so an expression the evaluator cannot take is refused before any query."""
    nothing = {leaf.source: Frame.empty(lead + 1) for tree in (node, *(t for t in trees.values() if t is not None))
               for leaf in leaves(tree, trees)}
    nothing.update({f"recorded:{name}": Frame.empty(lead + 1) for name, tree in trees.items() if tree is None})
    Evaluator(trees=trees, leaves=nothing, times=np.zeros(lead + 1), step=step.total_seconds()).evaluate(node)
