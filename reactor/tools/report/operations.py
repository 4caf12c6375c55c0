"""Prometheus 2.42's operations, over frames: what the evaluator (evaluation.py) applies, step for step.

Pure. A range `[w]` over a subquery's samples (the series evaluated at multiples of the resolution) reads those at
times in [t − w, t] (left-closed before Prometheus 3); `avg_over_time` is its compensated running mean
(funcAvgOverTime, with its handling of infinities); `max`/`min` keep the first sample unless a later one is
greater/smaller or the kept one is NaN; `and`/`unless`/`or` match on the `on (…)` labels or on every label but the
name; a vector comparison or arithmetic `on (…) group_left ()` keeps the left side's samples and labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from reactor.tools.report.frames import Frame, Mask, Values
from reactor.tools.report.syntax import COMPARISONS, Binary, Unsupported

NAME = "__name__"
COMPARE: dict[str, Callable[[Values, Values | float], Mask]] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
ARITHMETIC: dict[str, Callable[[Values | float, Values | float], Values]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def window(frame: Frame, points: int) -> Iterator[tuple[int, Values, Mask]]:
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
AGGREGATE: dict[str, Callable[[Values, Mask], tuple[Values, Mask]]] = {
    "max": _extreme(np.greater), "min": _extreme(np.less), "sum": _sum, "count": _count, "group": _group}


def running_mean(frame: Frame, points: int) -> tuple[Values, Mask]:
    """funcAvgOverTime of Prometheus 2.42: the running mean `v/count − mean/count` summed with Neumaier's
    compensation (kahanSumInc) over the samples in order, an infinite mean kept where the next sample is finite or
    the same infinity, and the compensation added at the end but to an infinite mean. A block of rows at a time:
    the arithmetic's temporaries are then a few MiB, not a week of the namespace's series each."""
    mean, present = np.zeros(frame.values.shape), np.zeros(frame.values.shape, dtype=bool)
    for first in range(0, frame.values.shape[0], _BLOCK):
        rows = slice(first, first + _BLOCK)
        block = Frame(frame.labels[rows], frame.values[rows], frame.present[rows])
        mean[rows], present[rows] = _block_mean(window(block, points), block.values.shape)
    return mean, present


_BLOCK = 128  # rows


def _block_mean(samples: Iterator[tuple[int, Values, Mask]], rows: tuple[int, ...]) -> tuple[Values, Mask]:
    mean, compensation, count = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    with np.errstate(all="ignore"):
        for k, v, p in samples:
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


def set_operation(operator: str, lhs: Frame, rhs: Frame, on: tuple[str, ...] | None) -> Frame:
    """`and`, `unless`, `or`: at each time, the left side's samples whose match is (not) on the right; `or` adds
    the right side's samples whose match is not on the left."""
    times = lhs.values.shape[1]
    if operator == "or":
        covered = _presence(lhs, on)
        rows = [rhs.present[i] & ~covered.get(_signature(labels, on), np.zeros(times, dtype=bool))
                for i, labels in enumerate(rhs.labels)]
        right = Frame(rhs.labels, rhs.values, np.array(rows, dtype=bool).reshape(rhs.present.shape))
        return merged(lhs, right)
    on_right = _presence(rhs, on)
    nothing = np.zeros(times, dtype=bool)
    found = np.array([on_right.get(_signature(labels, on), nothing) for labels in lhs.labels],
                     dtype=bool).reshape(lhs.present.shape)
    return Frame(lhs.labels, lhs.values, lhs.present & (found if operator == "and" else ~found))


def matched(node: Binary, lhs: Frame, rhs: Frame) -> Frame:
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
            result = Frame(lhs.labels, lhs.values, both & COMPARE[node.operator](lhs.values, values[at]))
        else:
            combined = ARITHMETIC[node.operator](lhs.values, values[at]).reshape(lhs.values.shape)
            result = Frame([without_name(row) for row in lhs.labels], combined, both)
    if not node.group_left and node.on is not None:
        result = Frame([{k: v for k, v in row.items() if k in node.on} for row in result.labels], result.values,
                       result.present)
    return merged(result, Frame.empty(times))


def _presence(frame: Frame, on: tuple[str, ...] | None) -> dict[tuple[str, ...], Mask]:
    """Per match signature, the times some row of `frame` with it is present."""
    found: dict[tuple[str, ...], Mask] = {}
    for labels, present in zip(frame.labels, frame.present, strict=True):
        key = _signature(labels, on)
        found[key] = found[key] | present if key in found else present
    return found


def merged(first: Frame, second: Frame) -> Frame:
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


def without_name(labels: Mapping[str, str]) -> Mapping[str, str]:
    return {k: v for k, v in labels.items() if k != NAME} if NAME in labels else labels


def mirrored(operator: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(operator, operator)


def matches(value: str, operator: str, wanted: str) -> bool:
    """A label matcher as Prometheus applies it: regexes anchored at both ends."""
    if operator == "=":
        return value == wanted
    if operator == "!=":
        return value != wanted
    hit = re.fullmatch(wanted, value) is not None
    return hit if operator == "=~" else not hit
