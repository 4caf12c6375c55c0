"""The rules evaluated over a window a block of time at a time, their answers joined as range queries give them.

Pure. Every operation the evaluator knows is pointwise in time but the range functions, which read back at most
the `lead` the grid was widened by: evaluating the columns of one block, with `lead` columns before it, gives
that block's answers exactly. A block at a time, the frames a rule builds (GPUMetricsMissing builds a dozen) are
a day of the namespace's series, not a week.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from reactor.tools.report.evaluation import Evaluator, Frame, Mask, Values
from reactor.tools.report.source import Series
from reactor.tools.report.syntax import Node, Unsupported

BLOCK_STEPS = 288  # a day at a week's 5-minute step
Target = Callable[[Evaluator], Frame]
_Joined = dict[tuple[tuple[str, str], ...],
               tuple[Mapping[str, str], list[tuple[int, int, Mask | None]], list[Values]]]


def evaluated(targets: Mapping[str, Target], *, trees: Mapping[str, Node | None], leaves: Mapping[str, Frame],
              times: Values, lead: int, step: float) -> dict[str, Sequence[Series] | Unsupported]:
    """Each target's answer on `times[lead:]` (the window), or why the evaluator could not give it."""
    joined: dict[str, _Joined] = {key: {} for key in targets}
    failed: dict[str, Unsupported] = {}
    for first in range(lead, len(times), BLOCK_STEPS):
        columns = slice(first - lead, min(first + BLOCK_STEPS, len(times)))
        evaluator = Evaluator(trees=trees, leaves={key: frame.columns(columns) for key, frame in leaves.items()},
                              times=times[columns], step=step)
        for key, target in targets.items():
            if key in failed:
                continue
            try:
                frame = target(evaluator)
            except Unsupported as e:
                failed[key] = e
                continue
            _join(joined[key], frame.columns(slice(lead, None)), first - lead)
    grid = array("d", times[lead:].tobytes())
    return {key: failed[key] if key in failed else _series(joined[key], grid) for key in targets}


def _join(joined: _Joined, frame: Frame, first: int) -> None:
    """The block's samples of each row: its values where present, and where (None: at every time of the block)."""
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
