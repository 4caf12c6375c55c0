"""The rules evaluated here, over Prometheus's answers for the parts of them that read no recorded series.

Pure: no I/O. The evaluator walks a parsed rule (syntax.py) over frames (frames.py) on one grid, applying
Prometheus 2.42's operations (operations.py); a recorded series it reads is evaluated once from its own rule (or
is an answer, where Prometheus was asked for it whole) and kept for every rule that reads it. The grid is widened
backwards by `lead` steps, so a range function at the first time of the window sees all of its range. Anything
else is `Unsupported`, and the rule goes to Prometheus (local.py, collect.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reactor.tools.report.frames import Frame, Values
from reactor.tools.report.operations import (
    AGGREGATE,
    ARITHMETIC,
    COMPARE,
    matched,
    matches,
    mirrored,
    running_mean,
    set_operation,
    window,
    without_name,
)
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
        rows = [i for i, labels in enumerate(frame.labels) if all(matches(labels.get(label, ""), op, value)
                                                                  for label, op, value in node.matchers)]
        return Frame([frame.labels[i] for i in rows], frame.values[rows], frame.present[rows])

    def _call(self, node: Call) -> Frame:
        (argument,) = node.arguments if len(node.arguments) == 1 else (None,)
        if not isinstance(argument, Selector) or argument.range is None:
            raise Unsupported(f"{node.function} of anything but a range of a recorded series")
        frame = self._selected(argument)
        points = int(argument.range.total_seconds() / self.step) + 1  # t − k·step for k·step ≤ w: [t − w, t]
        samples = window(frame, points)
        labels = [without_name(labels) for labels in frame.labels]
        rows = frame.values.shape
        if node.function == "avg_over_time":
            return Frame(labels, *running_mean(frame, points))
        value, present = np.zeros(rows), np.zeros(rows, dtype=bool)
        if node.function == "last_over_time":
            for k, v, p in samples:
                value[:, k:] = np.where(p, v, value[:, k:])
                present[:, k:] |= p
            return Frame(labels, value, present)
        if node.function == "present_over_time":
            for k, _, p in samples:
                present[:, k:] |= p
            return Frame(labels, np.ones(rows), present)
        raise Unsupported(f"function {node.function}")

    def _aggregation(self, node: Aggregation) -> Frame:
        if node.without or node.operator not in AGGREGATE:
            raise Unsupported(f"aggregation {node.operator}{' without' if node.without else ''}")
        inner = self.evaluate(node.argument)
        groups: dict[tuple[str, ...], list[int]] = {}
        for row, row_labels in enumerate(inner.labels):
            groups.setdefault(tuple(row_labels.get(label, "") for label in node.by), []).append(row)
        times = inner.values.shape[1]
        values, present = np.zeros((len(groups), times)), np.zeros((len(groups), times), dtype=bool)
        with np.errstate(all="ignore"):
            for i, rows in enumerate(groups.values()):
                values[i], present[i] = AGGREGATE[node.operator](inner.values[rows], inner.present[rows])
        labels = [{label: value for label, value in zip(node.by, key, strict=True) if value} for key in groups]
        return Frame(labels, values, present)

    def _binary(self, node: Binary) -> Frame:
        if _scalar(node.lhs) or _scalar(node.rhs):
            return self._with_scalar(node)
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if node.operator in SET_OPERATORS:
            if node.group_left or node.bool_:
                raise Unsupported("group_left or bool on a set operator")
            return set_operation(node.operator, lhs, rhs, node.on)
        if node.bool_ or (node.operator not in COMPARISONS and node.operator not in ARITHMETIC):
            raise Unsupported(f"{node.operator}{' bool' if node.bool_ else ''} between two vectors")
        return matched(node, lhs, rhs)

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
                operator = COMPARE[mirrored(node.operator) if scalar_left else node.operator]
                holds = operator(vector.values, scalar)
                if node.bool_:
                    return Frame([without_name(labels) for labels in vector.labels], holds.astype(np.float64),
                                 vector.present)
                return Frame(vector.labels, vector.values, vector.present & holds)
            if node.operator in ARITHMETIC:
                arithmetic = ARITHMETIC[node.operator]
                values = arithmetic(scalar, vector.values) if scalar_left else arithmetic(vector.values, scalar)
                return Frame([without_name(labels) for labels in vector.labels], values, vector.present)
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
