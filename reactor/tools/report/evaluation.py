"""The alerting rules evaluated here, over the recorded series Prometheus answered once each (local.py).

Pure: no I/O. A `Frame` is an instant vector at every time of a grid: one row per label set, a value and a
presence per time. The recorded series come on the report's grid widened backwards by `lead` steps, so a range
function at the first time of the window sees all of its range. Semantics are Prometheus 2.42's, step for step:
a range `[w]` over a subquery's samples (the series evaluated at multiples of the resolution) reads those at
times in [t − w, t] (left-closed before Prometheus 3); `avg_over_time` is its compensated running mean
(funcAvgOverTime, with its handling of infinities); a comparison with a number filters and keeps the vector's
value; `and`/`unless`/`or` match on the `on (…)` labels or on every label; a vector comparison
`on (…) group_left ()` keeps the left side's samples and labels. Anything else is `Unsupported`, and the rule
goes to Prometheus.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from reactor.tools.report.source import Series
from reactor.tools.report.syntax import (
    COMPARISONS,
    SET_OPERATORS,
    Aggregation,
    Binary,
    Call,
    Node,
    Number,
    Selector,
    Unsupported,
)

Values = NDArray[np.float64]
Mask = NDArray[np.bool_]
NAME = "__name__"
_COMPARE: dict[str, Callable[[Values, Values | float], Mask]] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
_ARITHMETIC: dict[str, Callable[[Values | float, Values | float], Values]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


@dataclass(frozen=True, slots=True)
class Frame:
    """An instant vector at each time of a grid: `values[row, t]`, there only where `present[row, t]`."""

    labels: Sequence[Mapping[str, str]]
    values: Values
    present: Mask

    @classmethod
    def empty(cls, times: int) -> Frame:
        return cls([], np.zeros((0, times)), np.zeros((0, times), dtype=bool))

    @classmethod
    def of(cls, series: Sequence[Series], start: float, step: float, times: int) -> Frame:
        """The series of a range query answered at start + k·step, k < times."""
        values, present = np.zeros((len(series), times)), np.zeros((len(series), times), dtype=bool)
        for row, s in enumerate(series):
            at = np.rint((np.frombuffer(s.times, dtype=np.float64) - start) / step).astype(np.int64)
            values[row, at] = np.frombuffer(s.values, dtype=np.float64)
            present[row, at] = True
        return cls([dict(s.labels) for s in series], values, present)

    def series(self, grid: array[float]) -> list[Series]:
        """The rows as a range query answers them: only the times present, the whole grid's array shared where
        a row is present at every time."""
        found = []
        times = np.frombuffer(grid, dtype=np.float64)
        for labels, values, present in zip(self.labels, self.values, self.present, strict=True):
            if present.all():
                found.append(Series(labels, grid, array("d", values.tobytes())))
            elif present.any():
                found.append(Series(labels, array("d", times[present].tobytes()),
                                    array("d", values[present].tobytes())))
        return found


class Evaluator:
    """Evaluates a parsed rule over `recorded` (name -> frame on the grid widened by `lead` steps of `step`
    seconds); the answer is on the report's grid, `lead` steps shorter."""

    def __init__(self, recorded: Mapping[str, Frame], *, lead: int, step: float) -> None:
        self.recorded = recorded
        self.lead = lead
        self.step = step

    def evaluate(self, node: Node) -> Frame:
        if isinstance(node, Selector):
            if node.range is not None:
                raise Unsupported(f"a range outside a function: {node.name}")
            whole = self._selected(node)
            return Frame(whole.labels, whole.values[:, self.lead:], whole.present[:, self.lead:])
        if isinstance(node, Call):
            return self._call(node)
        if isinstance(node, Aggregation):
            return self._aggregation(node)
        if isinstance(node, Binary):
            return self._binary(node)
        raise Unsupported(f"a number where a vector is read: {node}")

    def _selected(self, node: Selector) -> Frame:
        if node.name not in self.recorded:
            raise Unsupported(f"{node.name} is not a recorded series the report has")
        frame = self.recorded[node.name]
        if not node.matchers:
            return frame
        rows = [i for i, labels in enumerate(frame.labels) if all(_matches(labels.get(label, ""), op, value)
                                                                  for label, op, value in node.matchers)]
        return Frame([frame.labels[i] for i in rows], frame.values[rows], frame.present[rows])

    def _call(self, node: Call) -> Frame:
        argument = node.argument
        if not isinstance(argument, Selector) or argument.range is None:
            raise Unsupported(f"{node.function} of anything but a range of a recorded series")
        reach = argument.range.total_seconds() / self.step
        points = int(reach) + 1  # the samples at t − k·step for k·step ≤ w: [t − w, t]
        if points - 1 > self.lead:
            raise Unsupported(f"a range of {argument.range} reaches before the series asked for")
        frame = self._selected(argument)
        times = frame.values.shape[1] - self.lead
        # oldest first, as Prometheus reads them
        window = [(frame.values[:, self.lead - k:self.lead - k + times], frame.present[:, self.lead - k:][:, :times])
                  for k in range(points - 1, -1, -1)]
        labels = [_without_name(labels) for labels in frame.labels]
        rows = (len(labels), times)
        if node.function == "avg_over_time":
            return Frame(labels, *_running_mean(window, rows))
        if node.function == "last_over_time":
            value, present = np.zeros(rows), np.zeros(rows, dtype=bool)
            for v, p in window:
                value = np.where(p, v, value)
                present |= p
            return Frame(labels, value, present)
        if node.function == "present_over_time":
            present = np.zeros(rows, dtype=bool)
            for _, p in window:
                present |= p
            return Frame(labels, np.ones(rows), present)
        raise Unsupported(f"function {node.function}")

    def _aggregation(self, node: Aggregation) -> Frame:
        if node.operator != "count":
            raise Unsupported(f"aggregation {node.operator}")
        inner = self.evaluate(node.argument)
        groups: dict[tuple[str, ...], list[int]] = {}
        for row, row_labels in enumerate(inner.labels):
            groups.setdefault(tuple(row_labels.get(label, "") for label in node.by), []).append(row)
        times = inner.values.shape[1]
        counts = np.zeros((len(groups), times))
        for i, rows in enumerate(groups.values()):
            counts[i] = inner.present[rows].sum(axis=0)
        labels = [{label: value for label, value in zip(node.by, key, strict=True) if value} for key in groups]
        return Frame(labels, counts, counts > 0)

    def _binary(self, node: Binary) -> Frame:
        if node.bool_:
            raise Unsupported("a bool comparison")
        if isinstance(node.rhs, Number) or isinstance(node.lhs, Number):
            return self._with_number(node)
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if node.operator in SET_OPERATORS:
            if node.group_left:
                raise Unsupported("group_left on a set operator")
            return _set(node.operator, lhs, rhs, node.on)
        if node.operator in COMPARISONS:
            return _compare(node, lhs, rhs)
        raise Unsupported(f"{node.operator} between two vectors")

    def _with_number(self, node: Binary) -> Frame:
        number_left = isinstance(node.lhs, Number)
        vector_node, number = (node.rhs, node.lhs) if number_left else (node.lhs, node.rhs)
        if isinstance(vector_node, Number) or not isinstance(number, Number):
            raise Unsupported("an operation between two numbers")
        vector = self.evaluate(vector_node)
        with np.errstate(all="ignore"):
            if node.operator in COMPARISONS:
                operator = _COMPARE[_mirrored(node.operator) if number_left else node.operator]
                return Frame(vector.labels, vector.values, vector.present & operator(vector.values, number.value))
            if node.operator in _ARITHMETIC:
                arithmetic = _ARITHMETIC[node.operator]
                values = (arithmetic(number.value, vector.values) if number_left
                          else arithmetic(vector.values, number.value))
                return Frame([_without_name(labels) for labels in vector.labels], values, vector.present)
        raise Unsupported(f"{node.operator} with a number")


def _running_mean(window: list[tuple[Values, Mask]], rows: tuple[int, int]) -> tuple[Values, Mask]:
    """funcAvgOverTime of Prometheus 2.42: the running mean `v/count − mean/count` summed with Neumaier's
    compensation (kahanSumInc) over the samples in order, an infinite mean kept where the next sample is finite or
    the same infinity, and the compensation added at the end but to an infinite mean."""
    mean, compensation, count = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    with np.errstate(all="ignore"):
        for v, p in window:
            count += p
            infinite = np.isinf(mean)
            keep = infinite & ((np.isinf(v) & ((mean > 0) == (v > 0))) | (~np.isinf(v) & ~np.isnan(v)))
            step = p & ~keep
            increment = v / count - mean / count
            total = mean + increment
            lost = np.where(np.abs(mean) >= np.abs(increment), (mean - total) + increment, (increment - total) + mean)
            compensation = np.where(step, compensation + lost, compensation)
            mean = np.where(step, total, mean)
        return np.where(np.isinf(mean), mean, mean + compensation), count > 0


def _set(operator: str, lhs: Frame, rhs: Frame, on: tuple[str, ...] | None) -> Frame:
    """`and`, `unless`, `or`: at each time, the left side's samples whose match is (not) on the right; `or` adds
    the right side's samples whose match is not on the left."""
    times = lhs.values.shape[1]
    if operator == "or":
        covered = _presence(lhs, on)
        rows = [rhs.present[i] & ~covered.get(_signature(labels, on), np.zeros(times, dtype=bool))
                for i, labels in enumerate(rhs.labels)]
        right = Frame(rhs.labels, rhs.values, np.array(rows, dtype=bool).reshape(rhs.present.shape))
        return _merged(lhs, right)
    matched = _presence(rhs, on)
    nothing = np.zeros(times, dtype=bool)
    found = np.array([matched.get(_signature(labels, on), nothing) for labels in lhs.labels],
                     dtype=bool).reshape(lhs.present.shape)
    return Frame(lhs.labels, lhs.values, lhs.present & (found if operator == "and" else ~found))


def _compare(node: Binary, lhs: Frame, rhs: Frame) -> Frame:
    """`lhs op on (…) [group_left ()] rhs` between vectors: the left samples whose match on the right holds the
    comparison; the right side must have one sample per match at each time (else Prometheus refuses it)."""
    times = lhs.values.shape[1]
    index: dict[tuple[str, ...], int] = {}
    values, present = np.zeros((len(rhs.labels) + 1, times)), np.zeros((len(rhs.labels) + 1, times), dtype=bool)
    for row, row_labels in enumerate(rhs.labels):
        i = index.setdefault(_signature(row_labels, node.on), len(index))
        if (present[i] & rhs.present[row]).any():
            raise Unsupported("several samples on the right side of a vector comparison match one")
        values[i] = np.where(rhs.present[row], rhs.values[row], values[i])
        present[i] |= rhs.present[row]
    at = np.array([index.get(_signature(row, node.on), len(rhs.labels)) for row in lhs.labels], dtype=np.int64)
    with np.errstate(all="ignore"):
        holds = lhs.present & present[at] & _COMPARE[node.operator](lhs.values, values[at])
    labels: Sequence[Mapping[str, str]] = lhs.labels
    if not node.group_left and node.on is not None:
        labels = [{k: v for k, v in row.items() if k in node.on} for row in lhs.labels]
    return _merged(Frame(labels, lhs.values, holds.reshape(lhs.present.shape)), Frame.empty(times))


def _presence(frame: Frame, on: tuple[str, ...] | None) -> dict[tuple[str, ...], Mask]:
    """Per match signature, the times some row of `frame` with it is present."""
    found: dict[tuple[str, ...], Mask] = {}
    for labels, present in zip(frame.labels, frame.present, strict=True):
        key = _signature(labels, on)
        found[key] = found[key] | present if key in found else present
    return found


def _merged(first: Frame, second: Frame) -> Frame:
    """The rows of both, rows of one label set joined (a range query answers one series per label set)."""
    index: dict[tuple[tuple[str, str], ...], int] = {}
    labels: list[Mapping[str, str]] = []
    rows: list[tuple[Values, Mask]] = []
    for frame in (first, second):
        for row, row_labels in enumerate(frame.labels):
            key = tuple(sorted(row_labels.items()))
            v, p = frame.values[row], frame.present[row]
            if key in index:
                i = index[key]
                old_v, old_p = rows[i]
                rows[i] = (np.where(old_p, old_v, v), old_p | p)
            else:
                index[key] = len(rows)
                labels.append(row_labels)
                rows.append((v, p))
    times = first.values.shape[1]
    if not rows:
        return Frame.empty(times)
    return Frame(labels, np.stack([v for v, _ in rows]), np.stack([p for _, p in rows]))


def _signature(labels: Mapping[str, str], on: tuple[str, ...] | None) -> tuple[str, ...]:
    if on is None:
        return tuple(f"{k}={v}" for k, v in sorted(labels.items()) if k != NAME)
    return tuple(labels.get(label, "") for label in on)


def _without_name(labels: Mapping[str, str]) -> Mapping[str, str]:
    return {k: v for k, v in labels.items() if k != NAME} if NAME in labels else labels


def _mirrored(operator: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(operator, operator)


def _matches(value: str, operator: str, wanted: str) -> bool:
    """A label matcher as Prometheus applies it: regexes anchored at both ends."""
    if operator == "=":
        return value == wanted
    if operator == "!=":
        return value != wanted
    hit = re.fullmatch(wanted, value) is not None
    return hit if operator == "=~" else not hit
