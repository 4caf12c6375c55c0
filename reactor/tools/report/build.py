"""From what Prometheus said (collect.py) to the report: per workload, the accounting, the would-be alerts,
the policy's replay, the MIG fit; per namespace, the rebalancing trades. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reactor.core.model import Bounds, Quota
from reactor.policy.values import Policy
from reactor.tools.report import expressions as ex
from reactor.tools.report import mig, owners
from reactor.tools.report.collect import NamespaceData, Window
from reactor.tools.report.firing import episodes
from reactor.tools.report.model import (
    Decision,
    Episode,
    Grouping,
    Percentiles,
    Timeline,
    Trade,
    WorkloadKey,
    WorkloadReport,
)
from reactor.tools.report.replay import Fired, Shape, Subject, replay
from reactor.tools.report.source import Series

# Alert name -> the `hours` key it counts in.
HOURS = {"GPUIdle": "idle", "GPUUnderutilized": "underutilized", "GPUSaturated": "saturated",
         "GPUMemorySaturated": "memory-saturated", "GPUMetricsMissing": "metrics-missing"}
Container = tuple[str, str]  # (pod, container)


@dataclass(frozen=True, slots=True)
class Options:
    policy: Policy
    since: datetime
    until: datetime
    repeat_seconds: float = 4 * 3600  # Alertmanager's default repeat_interval
    mig_headroom: float = mig.DEFAULT_HEADROOM


class _Lookup:
    """One series' samples, read at a time exactly (`at`) or as last known at or before it (`last`)."""

    def __init__(self, samples: Sequence[tuple[float, float]]) -> None:
        self.times = [t for t, _ in samples]
        self.values = [v for _, v in samples]
        self.exact = dict(samples)

    def at(self, t: float) -> float | None:
        return self.exact.get(t)

    def last(self, t: float) -> float | None:
        i = bisect.bisect_right(self.times, t)
        return self.values[i - 1] if i else None


def _index(series: Sequence[Series]) -> dict[Container, _Lookup]:
    return {(s.labels.get("pod", ""), s.labels.get("container", "")): _Lookup(s.samples) for s in series}


def build_namespace(data: NamespaceData, window: Window,
                    options: Options) -> tuple[list[WorkloadReport], list[Trade]]:
    util, fb = _index(data.series.get(ex.UTILIZATION, ())), _index(data.series.get(ex.FB_USED, ()))
    gpus, idle = _index(data.series.get(ex.GPUS, ())), _index(data.series.get(ex.IDLE_GPUS, ()))
    pods = sorted({pod for pod, _ in (*gpus, *util)})
    pod_owner, grouping = owners.resolve(data.namespace, pods, data.owners)
    priorities = owners.priority_classes(data.owners)
    members: dict[WorkloadKey, list[Container]] = defaultdict(list)
    for c in sorted(set(gpus) | set(util)):
        members[pod_owner[c[0]]].append(c)
    grid = window.grid
    since, until = options.since.timestamp(), options.until.timestamp()
    fired_by: dict[WorkloadKey, list[Fired]] = defaultdict(list)
    for rule, answer in data.alerts:
        for s in answer:
            c = (s.labels.get("pod", ""), s.labels.get("container", ""))
            if c[0] not in pod_owner:
                continue
            hold, keep = rule.for_.total_seconds(), rule.keep_firing_for.total_seconds()
            for f in episodes(s.samples, grid, hold=hold, keep=keep):
                episode = Episode(rule.name, c[0], c[1], _time(f.active_at), _time(f.fired_at),
                                  None if f.resolved_at is None else _time(f.resolved_at), f.value)
                fired_by[pod_owner[c[0]]].append(Fired(episode, data.namespace, rule.labels,
                                                       _count(gpus, c, f.fired_at), _count(idle, c, f.fired_at)))
    subjects = [Subject(key, sorted(fired_by[key], key=lambda f: (f.episode.fired_at, f.episode.alert, f.episode.pod)),
                        _shape(members[key], gpus, priorities)) for key in sorted(members)]
    decisions = replay(subjects, _bounds(data, options.policy), options.policy, since=since, until=until,
                       repeat=options.repeat_seconds)
    step = window.step.total_seconds()
    reports = []
    for subject in subjects:
        key = subject.key
        timeline = _timeline(members[key], gpus, util, grid)
        inside = [i for i, t in enumerate(grid) if since <= t < until]
        fb_values = [v for c in members[key] for t in grid if (v := fb.get(c, _EMPTY).at(t)) is not None]
        gpu_hours = sum(timeline.gpus[i] for i in inside) * step / 3600
        released, added, held = _changed_hours(decisions[key], timeline, inside, step)
        timeline = replace(timeline, with_changes=held)
        reports.append(WorkloadReport(
            key=key, grouping=grouping, pods=tuple(sorted({p for p, _ in members[key]})), gpu_hours=gpu_hours,
            gpus_max=int(max(timeline.gpus, default=0)),
            utilization=_percentiles([u for i in inside if (u := timeline.utilization[i]) is not None]),
            memory=_percentiles(fb_values), hours=_hours(subject.fired, since, until),
            episodes=tuple(f.episode for f in subject.fired), decisions=tuple(decisions[key]),
            gpu_hours_released=released, gpu_hours_added=added,
            mig=_mig(data, members[key], timeline, options.mig_headroom), timeline=timeline))
    return reports, _trades(subjects, decisions, options, until)


_EMPTY = _Lookup(())


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _count(index: Mapping[Container, _Lookup], c: Container, t: float) -> int | None:
    value = index.get(c, _EMPTY).last(t)
    return None if value is None or math.isnan(value) else int(round(value))


def _shape(containers: Sequence[Container], gpus: Mapping[Container, _Lookup],
           priorities: Mapping[str, str]) -> Callable[[float], Shape]:
    def shape(t: float) -> Shape:
        per_container: dict[str, int] = {}
        live: set[str] = set()
        for pod, name in containers:
            value = gpus.get((pod, name), _EMPTY).at(t)
            if value is None:
                continue
            live.add(pod)
            per_container[name] = max(per_container.get(name, 0), int(round(value)))
        if not live:  # a gap: the last shape seen before it
            for pod, name in containers:
                value = gpus.get((pod, name), _EMPTY).last(t)
                if value is not None:
                    live.add(pod)
                    per_container[name] = max(per_container.get(name, 0), int(round(value)))
        priority = next((priorities[p] for p in sorted(live) if priorities.get(p)), None)
        return Shape(per_container, max(1, len(live)), priority)

    return shape


def _bounds(data: NamespaceData, policy: Policy) -> Callable[[float, int], Bounds]:
    """The namespace's GPU bounds at a time, from kube_resourcequota and kube_limitrange (kube-state-metrics)."""
    quotas: dict[str, dict[str, _Lookup]] = defaultdict(dict)
    for s in data.quota:
        quotas[s.labels.get("resourcequota", "")][s.labels.get("type", "")] = _Lookup(s.samples)
    limits = {s.labels.get("constraint", ""): _Lookup(s.samples) for s in data.limit_range}
    del policy

    def bounds(t: float, changed: int) -> Bounds:
        found = []
        for name, lines in sorted(quotas.items()):
            hard, used = lines.get("hard", _EMPTY).last(t), lines.get("used", _EMPTY).last(t)
            if hard is not None:
                found.append(Quota(name, int(hard), max(0, int(used or 0) + changed)))
        low, high = limits.get("min", _EMPTY).last(t), limits.get("max", _EMPTY).last(t)
        return Bounds(min_gpus=None if low is None else int(low), max_gpus=None if high is None else int(high),
                      quotas=tuple(found))

    return bounds


def _timeline(containers: Sequence[Container], gpus: Mapping[Container, _Lookup],
              util: Mapping[Container, _Lookup], grid: Sequence[float]) -> Timeline:
    held, busy = [], []
    for t in grid:
        total, weighted, weight = 0.0, 0.0, 0.0
        for c in containers:
            g = gpus.get(c, _EMPTY).at(t)
            u = util.get(c, _EMPTY).at(t)
            total += g or 0.0
            if u is not None and not math.isnan(u):
                w = g if g else 1.0
                weighted, weight = weighted + u * w, weight + w
        held.append(total)
        busy.append(weighted / weight if weight else None)
    return Timeline(tuple(grid), tuple(held), tuple(busy))


def _percentiles(values: list[float]) -> Percentiles:
    """Nearest-rank percentiles (no interpolation: every figure is a value that was measured)."""
    if not values:
        return Percentiles(None, None, None)
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return Percentiles(rank(0.50), rank(0.95), ordered[-1])


def _hours(fired: Sequence[Fired], since: float, until: float) -> dict[str, float]:
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


def _changed_hours(decisions: Sequence[Decision], timeline: Timeline, inside: Sequence[int],
                   step: float) -> tuple[float, float, tuple[float, ...]]:
    """GPU-hours the would-be changes give back and take, and the GPUs held with them at each time: from each change
    to the end of the window, while the workload still holds GPUs (a pod that ended holds none, so frees none);
    never more than it held."""
    changes = sorted((d.at.timestamp(), d.gpu_delta) for d in decisions if d.action is not None and d.gpu_delta)
    released = added = 0.0
    with_changes = []
    inside_set = set(inside)
    for i, (t, held) in enumerate(zip(timeline.times, timeline.gpus, strict=True)):
        net = sum(delta for at, delta in changes if at <= t)
        change = 0.0 if held <= 0 else max(-held, float(net))
        with_changes.append(held + change)
        if i in inside_set:
            released, added = released + max(0.0, -change), added + max(0.0, change)
    return released * step / 3600, added * step / 3600, tuple(with_changes)


def _mig(data: NamespaceData, containers: Sequence[Container], timeline: Timeline, headroom: float) -> mig.Fit | None:
    """The smallest MIG slice for a workload whose containers hold at most one GPU each (a slice is part of one)."""
    mine = [s for s in data.fb_mib if (s.labels.get("pod", ""), s.labels.get("container", "")) in set(containers)]
    if not mine or max(timeline.gpus, default=0) <= 0:
        return None
    if any(v > 1 for s in data.series.get(ex.GPUS, ()) for _, v in s.samples
           if (s.labels.get("pod", ""), s.labels.get("container", "")) in set(containers)):
        return None
    models = {s.labels.get("modelName", "") for s in mine}
    utilization = [u for u in timeline.utilization if u is not None]
    if len(models) != 1 or not utilization:
        return None
    peak_fb = max(v for s in mine for _, v in s.samples)
    return mig.smallest_fit(models.pop(), peak_fb_mib=peak_fb, peak_utilization=max(utilization), headroom=headroom)


def _trades(subjects: Sequence[Subject], decisions: Mapping[WorkloadKey, Sequence[Decision]], options: Options,
            until: float) -> list[Trade]:
    """Receivers refused for a full GPU quota while another workload of the namespace had a donor alert firing."""
    policy = options.policy
    found = []
    for receiver in subjects:
        for d in decisions[receiver.key]:
            if d.reason != "quota-exceeded" or d.alert not in policy.rebalance_receiver_alerts:
                continue
            start = d.at.timestamp()
            end = min((e.resolved_at.timestamp() for e in (f.episode for f in receiver.fired)
                       if e.alert == d.alert and e.fired_at.timestamp() <= start and e.resolved_at is not None
                       and e.resolved_at.timestamp() > start), default=until)
            for donor in subjects:
                if donor.key == receiver.key:
                    continue
                for f in donor.fired:
                    e = f.episode
                    if e.alert not in policy.rebalance_donor_alerts:
                        continue
                    lo = max(start, e.fired_at.timestamp())
                    hi = min(end, e.resolved_at.timestamp() if e.resolved_at is not None else until)
                    if hi > lo:
                        found.append(Trade(receiver.key.namespace, _quota_of(d.detail), receiver.key, donor.key,
                                           _time(lo), _time(hi), (hi - lo) / 3600, 0))
    return _merged(found)


def _quota_of(detail: str) -> str:
    return detail.split("quota ", 1)[1].split()[0].strip("'\":,;") if "quota " in detail else ""


def _merged(trades: list[Trade]) -> list[Trade]:
    """Overlapping spans of one (receiver, donor) pair joined: a refusal repeated while it fires counts once."""
    joined: list[Trade] = []
    for t in sorted(trades, key=lambda t: (t.receiver, t.donor, t.start)):
        last = joined[-1] if joined else None
        if last is not None and (last.receiver, last.donor) == (t.receiver, t.donor) and t.start <= last.end:
            end = max(last.end, t.end)
            joined[-1] = Trade(last.namespace, last.quota, last.receiver, last.donor, last.start, end,
                               (end - last.start).total_seconds() / 3600, last.gpus_short)
        else:
            joined.append(t)
    return joined


def grouping_note(groupings: set[Grouping]) -> str:
    if groupings == {Grouping.OWNER_SERIES}:
        return "pods grouped by kube-state-metrics' owner series"
    return ("some pods grouped by their names (no kube_pod_owner series in Prometheus): a guess, "
            "marked per workload")
