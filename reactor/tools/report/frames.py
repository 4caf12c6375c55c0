"""Frames: the instant vectors the report evaluates the rules over, at every time of a grid.

Pure. A `Frame` holds one row per label set, a value and a presence per time: two arrays (8 bytes and 1 byte a
sample), so a week of a namespace's thousand containers at a 5-minute step is 18 MiB, and every operation over it
is one array operation, not one per sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reactor.tools.report.source import Series

Values = NDArray[np.float64]
Mask = NDArray[np.bool_]


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


def _grown(rows: Any, wanted: int) -> Any:
    """`rows` with room for at least `wanted` rows (twice as many as now, at least)."""
    grown = np.zeros((max(wanted, 2 * len(rows)), rows.shape[1]), dtype=rows.dtype)
    grown[:len(rows)] = rows
    return grown
