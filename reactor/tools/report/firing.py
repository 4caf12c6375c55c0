"""When an alerting rule would have fired, from its expression's answers at each evaluation.

Pure. A range query answers the rule's expression at every step; this replays Prometheus's own state machine
over those answers (rules/alerting.go `AlertingRule.Eval`, v2.42): a series that appears is pending from that
evaluation (`activeAt`), fires at the first evaluation at least `for` later, keeps firing for `keep_firing_for`
after it last appeared, and a pending one that disappears is forgotten. Exact when the step is the rules'
evaluation interval; with a coarser step a condition shorter than a step can be missed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Firing:
    """One episode: pending from `active_at`, firing from `fired_at` until `resolved_at` (None: still firing at
    the end of the window). `value` is the expression's value at `fired_at`: what the notification carries."""

    active_at: float
    fired_at: float
    resolved_at: float | None
    value: float


def episodes(samples: Sequence[tuple[float, float]], grid: Sequence[float], *, hold: float,
             keep: float) -> list[Firing]:
    """The firing episodes of one series, whose expression returned `samples` on the evaluation `grid`
    (both unix seconds; a grid time with no sample is an evaluation that returned nothing for it)."""
    present = dict(samples)
    found: list[Firing] = []
    active_at: float | None = None
    fired_at: float | None = None
    value = 0.0
    keep_since: float | None = None
    for ts in grid:
        if ts in present:
            keep_since = None
            if active_at is None:
                active_at = ts
            if fired_at is None and ts - active_at >= hold:
                fired_at, value = ts, present[ts]
            continue
        if active_at is None:
            continue
        if fired_at is not None and keep > 0:
            keep_since = ts if keep_since is None else keep_since
            if ts - keep_since < keep:
                continue
        if fired_at is not None:
            found.append(Firing(active_at, fired_at, ts, value))
        active_at = fired_at = keep_since = None
    if active_at is not None and fired_at is not None:
        found.append(Firing(active_at, fired_at, None, value))
    return found
