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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    String,
    Unsupported,
    children,
    selected,
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
    def of(cls, pieces: Iterable[Sequence[Series]], start: float, step: float, times: int) -> Frame:
        """The series of a range query answered in pieces at start + k·step, k < times: rows filled as the pieces
        come, in arrays grown by doubling (a view of the rows filled is kept, no copy)."""
        index: dict[tuple[tuple[str, str], ...], int] = {}
        labels: list[Mapping[str, str]] = []
        values, present = np.zeros((0, times)), np.zeros((0, times), dtype=bool)
        for piece in pieces:
            for s in piece:
                row = index.setdefault(tuple(sorted(s.labels.items())), len(labels))
                if row == len(labels):
                    labels.append(s.labels)
                    if row == len(values):
                        values, present = _grown(values, row + len(piece)), _grown(present, row + len(piece))
                at = np.rint((np.frombuffer(s.times, dtype=np.float64) - start) / step).astype(np.int64)
                values[row, at] = np.frombuffer(s.values, dtype=np.float64)
                present[row, at] = True
        return cls(labels, values[:len(labels)], present[:len(labels)])

    def copy(self) -> Frame:
        return Frame(self.labels, self.values.copy(), self.present.copy())

    def columns(self, times: slice) -> Frame:
        """The frame at some of its times (views)."""
        return Frame(self.labels, self.values[:, times], self.present[:, times])


class Evaluator:
    """Evaluates parsed rules over one grid (`times`, unix seconds `step` apart, begun early enough that every range
    the rules read, nested as they nest, lies on it where the answer is read).

    `trees`: each recorded series evaluated here by its rule's tree, or None where Prometheus answered the whole
    series (`leaves["recorded:<name>"]`). `leaves`: Prometheus's answers for the parts of the rules that read no
    recorded series (raw selectors, `rate`, `label_replace`, …), by their text; a recorded series evaluated once
    is kept for every rule that reads it.
    """

    def __init__(self, *, trees: Mapping[str, Node | None], leaves: Mapping[str, Frame], times: Values,
                 step: float) -> None:
        self.trees = trees
        self.leaves = leaves
        self.times = times
        self.step = step
        self._recorded: dict[str, Frame] = {}

    def recorded(self, name: str) -> Frame:
        """The recorded series `name` on the grid."""
        if name not in self._recorded:
            if name not in self.trees:
                raise Unsupported(f"{name} is not a recorded series the report has")
            tree = self.trees[name]
            self._recorded[name] = self.leaf(f"recorded:{name}") if tree is None else self.evaluate(tree)
        return self._recorded[name]

    def leaf(self, key: str) -> Frame:
        if key not in self.leaves:
            raise Unsupported(f"no answer for {key[:60]!r}")
        return self.leaves[key]

    def evaluate(self, node: Node) -> Frame:
        if not reads_recorded(node, self.trees):
            if isinstance(node, Number | String) or _is_time(node):
                raise Unsupported(f"a scalar where a vector is read: {node.source}")
            return self.leaf(node.source)
        if isinstance(node, Selector):
            if node.range is not None:
                raise Unsupported(f"a range outside a function: {node.name}")
            return self._selected(node)
        if isinstance(node, Call):
            return self._call(node)
        if isinstance(node, Aggregation):
            return self._aggregation(node)
        if isinstance(node, Binary):
            return self._binary(node)
        raise Unsupported(f"cannot evaluate {node.source}")

    def _selected(self, node: Selector) -> Frame:
        frame = self.recorded(node.name)
        if not node.matchers:
            return frame
        rows = [i for i, labels in enumerate(frame.labels) if all(_matches(labels.get(label, ""), op, value)
                                                                  for label, op, value in node.matchers)]
        return Frame([frame.labels[i] for i in rows], frame.values[rows], frame.present[rows])

    def _call(self, node: Call) -> Frame:
        (argument,) = node.arguments if len(node.arguments) == 1 else (None,)
        if not isinstance(argument, Selector) or argument.range is None:
            raise Unsupported(f"{node.function} of anything but a range of a recorded series")
        frame = self._selected(argument)
        points = int(argument.range.total_seconds() / self.step) + 1  # t − k·step for k·step ≤ w: [t − w, t]
        window = _window(frame, points)
        labels = [_without_name(labels) for labels in frame.labels]
        rows = frame.values.shape
        if node.function == "avg_over_time":
            return Frame(labels, *_running_mean(frame, points))
        value, present = np.zeros(rows), np.zeros(rows, dtype=bool)
        if node.function == "last_over_time":
            for k, v, p in window:
                value[:, k:] = np.where(p, v, value[:, k:])
                present[:, k:] |= p
            return Frame(labels, value, present)
        if node.function == "present_over_time":
            for k, _, p in window:
                present[:, k:] |= p
            return Frame(labels, np.ones(rows), present)
        raise Unsupported(f"function {node.function}")

    def _aggregation(self, node: Aggregation) -> Frame:
        if node.without or node.operator not in _AGGREGATE:
            raise Unsupported(f"aggregation {node.operator}{' without' if node.without else ''}")
        inner = self.evaluate(node.argument)
        groups: dict[tuple[str, ...], list[int]] = {}
        for row, row_labels in enumerate(inner.labels):
            groups.setdefault(tuple(row_labels.get(label, "") for label in node.by), []).append(row)
        times = inner.values.shape[1]
        values, present = np.zeros((len(groups), times)), np.zeros((len(groups), times), dtype=bool)
        with np.errstate(all="ignore"):
            for i, rows in enumerate(groups.values()):
                values[i], present[i] = _AGGREGATE[node.operator](inner.values[rows], inner.present[rows])
        labels = [{label: value for label, value in zip(node.by, key, strict=True) if value} for key in groups]
        return Frame(labels, values, present)

    def _binary(self, node: Binary) -> Frame:
        if _scalar(node.lhs) or _scalar(node.rhs):
            return self._with_scalar(node)
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if node.operator in SET_OPERATORS:
            if node.group_left or node.bool_:
                raise Unsupported("group_left or bool on a set operator")
            return _set(node.operator, lhs, rhs, node.on)
        if node.bool_ or (node.operator not in COMPARISONS and node.operator not in _ARITHMETIC):
            raise Unsupported(f"{node.operator}{' bool' if node.bool_ else ''} between two vectors")
        return _matched(node, lhs, rhs)

    def _scalar(self, node: Node) -> Values | float:
        if isinstance(node, Number):
            return node.value
        if _is_time(node):
            return self.times
        raise Unsupported(f"a scalar other than a number or time(): {node.source}")

    def _with_scalar(self, node: Binary) -> Frame:
        scalar_left = _scalar(node.lhs)
        vector_node, scalar_node = (node.rhs, node.lhs) if scalar_left else (node.lhs, node.rhs)
        if _scalar(vector_node) or node.on is not None or node.group_left:
            raise Unsupported(f"an operation between two scalars, or matching on a scalar: {node.source}")
        vector, scalar = self.evaluate(vector_node), self._scalar(scalar_node)
        with np.errstate(all="ignore"):
            if node.operator in COMPARISONS:
                operator = _COMPARE[_mirrored(node.operator) if scalar_left else node.operator]
                holds = operator(vector.values, scalar)
                if node.bool_:
                    return Frame([_without_name(labels) for labels in vector.labels], holds.astype(np.float64),
                                 vector.present)
                return Frame(vector.labels, vector.values, vector.present & holds)
            if node.operator in _ARITHMETIC:
                arithmetic = _ARITHMETIC[node.operator]
                values = arithmetic(scalar, vector.values) if scalar_left else arithmetic(vector.values, scalar)
                return Frame([_without_name(labels) for labels in vector.labels], values, vector.present)
        raise Unsupported(f"{node.operator} with a scalar")


def reads_recorded(node: Node, recorded: Mapping[str, object]) -> bool:
    """Whether `node` reads a recorded series: where it does not, Prometheus answers it (a leaf)."""
    return bool(selected(node) & set(recorded))


def leaves(node: Node, recorded: Mapping[str, object]) -> list[Node]:
    """The largest parts of `node` that read no recorded series (numbers and `time()` aside): asked of Prometheus."""
    if not reads_recorded(node, recorded):
        return [] if isinstance(node, Number | String) or _is_time(node) else [node]
    return [leaf for child in children(node) for leaf in leaves(child, recorded)]


def _is_time(node: Node) -> bool:
    return isinstance(node, Call) and node.function == "time" and not node.arguments


def _scalar(node: Node) -> bool:
    return isinstance(node, Number) or _is_time(node)


def _grown(rows: Any, wanted: int) -> Any:
    """`rows` with room for at least `wanted` rows (twice as many as now, at least)."""
    grown = np.zeros((max(wanted, 2 * len(rows)), rows.shape[1]), dtype=rows.dtype)
    grown[:len(rows)] = rows
    return grown


def _window(frame: Frame, points: int) -> Iterator[tuple[int, Values, Mask]]:
    """The samples of a range of `points` evaluations, oldest first as Prometheus reads them: for each k, the
    frame as it was k steps before each time from the k-th on (views, not copies: a week of a namespace's series
    is tens of MiB)."""
    times = frame.values.shape[1]
    for k in range(min(points, times) - 1, -1, -1):
        yield k, frame.values[:, :times - k], frame.present[:, :times - k]


def _extreme(better: Callable[[Values, Values], Mask]) -> Callable[[Values, Mask], tuple[Values, Mask]]:
    """max/min as Prometheus 2.42 aggregates: the first sample, replaced by a later one that is `better` or where
    the kept one is NaN."""
    def aggregate(values: Values, present: Mask) -> tuple[Values, Mask]:
        kept, seen = np.zeros(values.shape[1]), np.zeros(values.shape[1], dtype=bool)
        for v, p in zip(values, present, strict=True):
            take = p & (~seen | better(v, kept) | np.isnan(kept))
            kept, seen = np.where(take, v, kept), seen | p
        return kept, seen
    return aggregate


def _sum(values: Values, present: Mask) -> tuple[Values, Mask]:
    total = np.zeros(values.shape[1])
    for v, p in zip(values, present, strict=True):
        total = np.where(p, total + v, total)
    return total, np.asarray(present.any(axis=0), dtype=bool)


def _count(values: Values, present: Mask) -> tuple[Values, Mask]:
    counts = present.sum(axis=0).astype(np.float64)
    return counts, counts > 0


def _group(values: Values, present: Mask) -> tuple[Values, Mask]:
    return np.ones(values.shape[1]), np.asarray(present.any(axis=0), dtype=bool)


# `avg` is not here: Prometheus's running mean depends on the order it meets the series in, which a range query's
# answer does not keep; a recorded series averaged so is asked of Prometheus whole. `sum` is exact for the integer
# counts the rules sum (0/1 from `< bool`), in any order.
_AGGREGATE: dict[str, Callable[[Values, Mask], tuple[Values, Mask]]] = {
    "max": _extreme(np.greater), "min": _extreme(np.less), "sum": _sum, "count": _count, "group": _group}


def _running_mean(frame: Frame, points: int) -> tuple[Values, Mask]:
    """funcAvgOverTime of Prometheus 2.42: the running mean `v/count − mean/count` summed with Neumaier's
    compensation (kahanSumInc) over the samples in order, an infinite mean kept where the next sample is finite or
    the same infinity, and the compensation added at the end but to an infinite mean. A block of rows at a time:
    the arithmetic's temporaries are then a few MiB, not a week of the namespace's series each."""
    mean, present = np.zeros(frame.values.shape), np.zeros(frame.values.shape, dtype=bool)
    for first in range(0, frame.values.shape[0], _BLOCK):
        rows = slice(first, first + _BLOCK)
        block = Frame(frame.labels[rows], frame.values[rows], frame.present[rows])
        mean[rows], present[rows] = _block_mean(_window(block, points), block.values.shape)
    return mean, present


_BLOCK = 128  # rows


def _block_mean(window: Iterator[tuple[int, Values, Mask]], rows: tuple[int, ...]) -> tuple[Values, Mask]:
    mean, compensation, count = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    with np.errstate(all="ignore"):
        for k, v, p in window:
            m, n = mean[:, k:], count[:, k:]
            n += p
            keep = np.isinf(m) & ((np.isinf(v) & ((m > 0) == (v > 0))) | (~np.isinf(v) & ~np.isnan(v)))
            step = p & ~keep
            increment = v / n - m / n
            total = m + increment
            lost = np.where(np.abs(m) >= np.abs(increment), (m - total) + increment, (increment - total) + m)
            compensation[:, k:] = np.where(step, compensation[:, k:] + lost, compensation[:, k:])
            mean[:, k:] = np.where(step, total, m)
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


def _matched(node: Binary, lhs: Frame, rhs: Frame) -> Frame:
    """`lhs op on (…) [group_left ()] rhs` between vectors: each left sample with its match on the right, compared
    (kept where it holds, with its own value) or combined; the right side must have one sample per match at each
    time (else Prometheus refuses it)."""
    times = lhs.values.shape[1]
    index: dict[tuple[str, ...], int] = {}
    values, present = np.zeros((len(rhs.labels) + 1, times)), np.zeros((len(rhs.labels) + 1, times), dtype=bool)
    for row, row_labels in enumerate(rhs.labels):
        i = index.setdefault(_signature(row_labels, node.on), len(index))
        if (present[i] & rhs.present[row]).any():
            raise Unsupported("several samples on the right side of a vector operation match one")
        values[i] = np.where(rhs.present[row], rhs.values[row], values[i])
        present[i] |= rhs.present[row]
    at = np.array([index.get(_signature(row, node.on), len(rhs.labels)) for row in lhs.labels], dtype=np.int64)
    both = (lhs.present & present[at]).reshape(lhs.present.shape)
    with np.errstate(all="ignore"):
        if node.operator in COMPARISONS:
            result = Frame(lhs.labels, lhs.values, both & _COMPARE[node.operator](lhs.values, values[at]))
        else:
            combined = _ARITHMETIC[node.operator](lhs.values, values[at]).reshape(lhs.values.shape)
            result = Frame([_without_name(row) for row in lhs.labels], combined, both)
    if not node.group_left and node.on is not None:
        result = Frame([{k: v for k, v in row.items() if k in node.on} for row in result.labels], result.values,
                       result.present)
    return _merged(result, Frame.empty(times))


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
