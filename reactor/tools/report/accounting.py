"""The accounting of one workload over the window: percentiles, hours an alert fired, GPU-hours the would-be
changes give back or take. Pure."""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Sequence

from reactor.tools.report.model import Decision, Percentiles, Timeline
from reactor.tools.report.replay import Fired

# Alert name -> the `hours` key it counts in.
HOURS = {"GPUIdle": "idle", "GPUUnderutilized": "underutilized", "GPUSaturated": "saturated",
         "GPUMemorySaturated": "memory-saturated", "GPUMetricsMissing": "metrics-missing"}


def percentiles(values: list[float]) -> Percentiles:
    """Nearest-rank percentiles (no interpolation: every figure is a value that was measured)."""
    if not values:
        return Percentiles(None, None, None)
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return Percentiles(rank(0.50), rank(0.95), ordered[-1])


def hours(fired: Sequence[Fired], since: float, until: float) -> dict[str, float]:
    """Hours each alert fired for the workload, overlapping episodes (two pods) counted once."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for f in fired:
        e = f.episode
        end = e.resolved_at.timestamp() if e.resolved_at is not None else until
        start = max(e.fired_at.timestamp(), since)
        if e.alert in HOURS and min(end, until) > start:
            spans[HOURS[e.alert]].append((start, min(end, until)))
    return {name: _union(spans.get(name, [])) / 3600 for name in HOURS.values()}


def _union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def changed_hours(decisions: Sequence[Decision], timeline: Timeline, inside: Sequence[int],
                   step: float) -> tuple[float, float, Sequence[float]]:
    """GPU-hours the would-be changes give back and take, and the GPUs held with them at each time: from each change
    to the end of the window, while the workload still holds GPUs (a pod that ended holds none, so frees none);
    never more than it held."""
    changes = sorted((d.at.timestamp(), d.gpu_delta) for d in decisions if d.action is not None and d.gpu_delta)
    if not changes:
        return 0.0, 0.0, timeline.gpus
    released = added = 0.0
    with_changes = []
    inside_set = set(inside)
    net, applied = 0, 0
    for i, (t, held) in enumerate(zip(timeline.times, timeline.gpus, strict=True)):
        while applied < len(changes) and changes[applied][0] <= t:
            net += changes[applied][1]
            applied += 1
        change = 0.0 if held <= 0 else max(-held, float(net))
        with_changes.append(held + change)
        if i in inside_set:
            released, added = released + max(0.0, -change), added + max(0.0, change)
    return released * step / 3600, added * step / 3600, array("d", with_changes)
