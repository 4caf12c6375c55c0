"""The rules evaluated over a window a piece of time at a time, as Prometheus's answers for the leaves come in.

Pure. Every operation the evaluator knows is pointwise in time but the range functions, which read back at most
the `lead` the grid was widened by: evaluating the columns of one piece, with the `lead` columns before it, gives
that piece's answers exactly. So only a piece of the leaves (and the tail of the one before) is held, not a week of
the namespace's series, and the frames a rule builds (GPUMetricsMissing builds a dozen) are a piece wide. The
answers are joined per series as a range query gives them.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from reactor.tools.report.evaluation import Evaluator
from reactor.tools.report.frames import Frame, Mask, Values
from reactor.tools.report.source import Series
from reactor.tools.report.syntax import Node, Unsupported

Target = Callable[[Evaluator], Frame]
_Joined = dict[tuple[tuple[str, str], ...],
               tuple[Mapping[str, str], list[tuple[int, int, Mask | None]], list[Values]]]


class Stream:
    """Each target's answer on `times[lead:]` (the window), fed the leaves' answers piece by piece, in order.

    Invariant: `held` is the last `lead` columns fed (fewer at the start), `held_width` of them, beginning at
    column `start` of `times`; every column before `done` has been evaluated.
    """

    def __init__(self, targets: Mapping[str, Target], *, trees: Mapping[str, Node | None], times: Values,
                 lead: int, step: float) -> None:
        self.targets = targets
        self.trees = trees
        self.times = times
        self.lead = lead
        self.step = step
        self.held: dict[str, Frame] = {}
        self.held_width = 0
        self.start = 0
        self.done = lead
        self.joined: dict[str, _Joined] = {key: {} for key in targets}
        self.failed: dict[str, Unsupported] = {}

    def add(self, leaves: Mapping[str, Frame], width: int) -> None:
        """The next `width` columns of every leaf (all of them, a frame each)."""
        fed = {key: _concatenated(self.held.get(key), frame) for key, frame in leaves.items()}
        end = self.start + self.held_width + width
        if end > self.done:  # `start` is then `done − lead`: the fed columns begin with the lead the ranges read
            self._evaluate(fed, self.start, end)
            self.done = end
        keep = min(self.lead, end - self.start)
        self.held = {key: frame.columns(slice(frame.values.shape[1] - keep, None)).copy() for key, frame in fed.items()}
        self.held_width = keep
        self.start = end - keep

    def answers(self) -> dict[str, Sequence[Series] | Unsupported]:
        """Each target's series, or why the evaluator could not give it."""
        grid = array("d", self.times[self.lead:].tobytes())
        return {key: self.failed[key] if key in self.failed else _series(self.joined.pop(key), grid)
                for key in self.targets}

    def _evaluate(self, leaves: Mapping[str, Frame], first: int, end: int) -> None:
        """Every target over columns [first, end), answers from `first + lead` on (`first` on the window's grid)."""
        evaluator = Evaluator(trees=self.trees, leaves=leaves, times=self.times[first:end], step=self.step)
        for key, target in self.targets.items():
            if key in self.failed:
                continue
            try:
                frame = target(evaluator)
            except Unsupported as e:
                self.failed[key] = e
                continue
            _join(self.joined[key], frame.columns(slice(self.lead, None)), first)


def _concatenated(held: Frame | None, frame: Frame) -> Frame:
    """`held`'s columns then `frame`'s, over the rows of both."""
    if held is None:
        return frame
    index: dict[tuple[tuple[str, str], ...], int] = {}
    labels: list[Mapping[str, str]] = []
    for row in (*held.labels, *frame.labels):
        if index.setdefault(tuple(sorted(row.items())), len(labels)) == len(labels):
            labels.append(row)
    width = held.values.shape[1]
    values = np.zeros((len(labels), width + frame.values.shape[1]))
    present = np.zeros(values.shape, dtype=bool)
    for part, (begin, end) in ((held, (0, width)), (frame, (width, values.shape[1]))):
        rows = [index[tuple(sorted(row.items()))] for row in part.labels]
        values[rows, begin:end] = part.values
        present[rows, begin:end] = part.present
    return Frame(labels, values, present)


def _join(joined: _Joined, frame: Frame, first: int) -> None:
    """The piece's samples of each row: its values where present, and where (None: at every time of the piece);
    `first` is the piece's first column on the window's grid."""
    for labels, values, present in zip(frame.labels, frame.values, frame.present, strict=True):
        if present.any():
            _, where, found = joined.setdefault(tuple(sorted(labels.items())), (labels, [], []))
            whole = bool(present.all())
            where.append((first, len(present), None if whole else present.copy()))
            found.append(values.copy() if whole else values[present])


def _series(joined: _Joined, grid: array[float]) -> list[Series]:
    """The rows as a range query answers them, each row's pieces let go as it is joined; the grid's array shared
    where a row is present at every time."""
    found = []
    times = np.frombuffer(grid, dtype=np.float64)
    while joined:
        _, (labels, where, values) = joined.popitem()
        samples = array("d", np.concatenate(values).tobytes())
        at = grid if len(samples) == len(grid) else array("d", np.concatenate(
            [times[first:first + n] if mask is None else times[first:first + n][mask] for first, n, mask in where]
        ).tobytes())
        found.append(Series(labels, at, samples))
    return found
