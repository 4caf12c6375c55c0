"""From what Prometheus said (collect.py) to the report: per workload, the accounting, the would-be alerts,
the policy's replay, the MIG fit; per namespace, the rebalancing trades. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reactor.core.model import Bounds, Quota
from reactor.policy.values import Policy
from reactor.tools.report import accounting, mig, owners
from reactor.tools.report import expressions as ex
from reactor.tools.report.collect import NamespaceData, Window
from reactor.tools.report.firing import episodes
from reactor.tools.report.model import (
    Episode,
    Grouping,
    Timeline,
    Trade,
    WorkloadKey,
    WorkloadReport,
)
from reactor.tools.report.replay import Fired, Shape, Subject, replay
from reactor.tools.report.source import Series
from reactor.tools.report.trades import trades

Container = tuple[str, str]  # (pod, container)


@dataclass(frozen=True, slots=True)
class Options:
    policy: Policy
    since: datetime
    until: datetime
    repeat_seconds: float = 4 * 3600  # Alertmanager's default repeat_interval
    stale_after: float = 600  # the values' staleAfter: how far back the rules' annotation lookups reach
    mig_headroom: float = mig.DEFAULT_HEADROOM


class _Lookup:
    """One series' samples, read at a time exactly (`at`) or as last known at or before it (`last`); over the
    series' own arrays (source.py), copied nowhere."""

    def __init__(self, times: Sequence[float], values: Sequence[float]) -> None:
        self.times = times
        self.values = values

    def at(self, t: float) -> float | None:
        i = bisect.bisect_left(self.times, t)
        return self.values[i] if i < len(self.times) and self.times[i] == t else None

    def last(self, t: float) -> float | None:
        i = bisect.bisect_right(self.times, t)
        return self.values[i - 1] if i else None


def _index(series: Sequence[Series]) -> dict[Container, _Lookup]:
    return {(s.labels.get("pod", ""), s.labels.get("container", "")): _Lookup(s.times, s.values) for s in series}


def build_namespace(data: NamespaceData, window: Window,
                    options: Options) -> tuple[list[WorkloadReport], list[Trade]]:
    util, fb = _index(data.series.get(ex.UTILIZATION, ())), _index(data.series.get(ex.FB_USED, ()))
    gpus, idle = _index(data.series.get(ex.GPUS, ())), _index(data.series.get(ex.IDLE_GPUS, ()))
    throttling = _index(data.series.get(ex.THROTTLING, ()))
    pods = sorted({pod for pod, _ in (*gpus, *util)})
    resolved = owners.resolve(data.namespace, pods, data.owners, data.cluster_owners)
    pod_owner = {pod: key for pod, (key, _) in resolved.items()}
    priorities = owners.priority_classes(data.owners)
    members: dict[WorkloadKey, list[Container]] = defaultdict(list)
    for c in sorted(set(gpus) | set(util)):
        members[pod_owner[c[0]]].append(c)
    grid = array("d", window.grid)
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
                cpu = _throttling(throttling, c, f.fired_at, options.stale_after) if rule.cpu_annotated else None
                fired_by[pod_owner[c[0]]].append(Fired(episode, data.namespace, rule.labels,
                                                       _count(gpus, c, f.fired_at), _count(idle, c, f.fired_at), cpu))
    subjects = [Subject(key, sorted(fired_by[key], key=lambda f: (f.episode.fired_at, f.episode.alert, f.episode.pod)),
                        _shape(members[key], gpus, priorities)) for key in sorted(members)]
    decisions = replay(subjects, _bounds(data, options.policy), options.policy, since=since, until=until,
                       repeat=options.repeat_seconds)
    step = window.step.total_seconds()
    most_gpus = {c: max(lookup.values, default=0.0) for c, lookup in gpus.items()}
    fb_by = data_fb(data)
    reports = []
    inside = [i for i, t in enumerate(grid) if since <= t < until]
    on_grid = _positions(grid)
    first = inside[0] if inside else len(grid)  # the report starts at `since`: the lead-in only warms the rules up
    for subject in subjects:
        key = subject.key
        whole = _timeline(members[key], gpus, util, grid)
        fb_values = [v for c in members[key] for t, v in _pairs(fb.get(c, _EMPTY))
                     if since <= t < until and on_grid(t) is not None]
        gpu_hours = sum(whole.gpus[i] for i in inside) * step / 3600
        busy = accounting.percentiles([u for i in inside if (u := whole.utilization[i]) == u])  # NaN: unknown
        released, added, held = accounting.changed_hours(decisions[key], whole, inside, step)
        timeline = Timeline(whole.times[first:], whole.gpus[first:], whole.utilization[first:], held[first:])
        reports.append(WorkloadReport(
            key=key, grouping=min((resolved[p][1] for p, _ in members[key]), key=lambda g: g.certainty),
            pods=tuple(sorted({p for p, _ in members[key]})), gpu_hours=gpu_hours,
            gpus_max=int(max(timeline.gpus, default=0)), utilization=busy, memory=accounting.percentiles(fb_values),
            hours=accounting.hours(subject.fired, since, until),
            episodes=tuple(f.episode for f in subject.fired), decisions=tuple(decisions[key]),
            gpu_hours_released=released, gpu_hours_added=added,
            mig=_mig(fb_by, members[key], timeline, options.mig_headroom, most_gpus), timeline=timeline))
    return reports, trades(subjects, decisions, options.policy, until)


_EMPTY = _Lookup((), ())


def _pairs(lookup: _Lookup) -> Iterator[tuple[float, float]]:
    return zip(lookup.times, lookup.values, strict=True)


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _count(index: Mapping[Container, _Lookup], c: Container, t: float) -> int | None:
    value = index.get(c, _EMPTY).last(t)
    return None if value is None or math.isnan(value) else int(round(value))


def _throttling(index: Mapping[Container, _Lookup], c: Container, t: float, stale_after: float) -> str:
    """The rule's `cpu_throttling` annotation at `t`: the latest ratio within `staleAfter`, else "unknown"
    (reactor/tools/rules/cpu.py `throttling_annotation`)."""
    lookup = index.get(c, _EMPTY)
    i = bisect.bisect_right(lookup.times, t)
    if i and t - lookup.times[i - 1] <= stale_after:
        return f"{lookup.values[i - 1]:.3f}"
    return "unknown"


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
        quotas[s.labels.get("resourcequota", "")][s.labels.get("type", "")] = _Lookup(s.times, s.values)
    limits = {s.labels.get("constraint", ""): _Lookup(s.times, s.values) for s in data.limit_range}
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
    held = [0.0] * len(grid)
    weighted = [0.0] * len(grid)
    weight = [0.0] * len(grid)
    position = _positions(grid)
    for c in containers:
        lookup = gpus.get(c, _EMPTY)
        gpus_at: dict[int, float] = {}
        for t, g in zip(lookup.times, lookup.values, strict=True):
            if (i := position(t)) is not None:
                gpus_at[i] = g
                if g:
                    held[i] += g
        lookup = util.get(c, _EMPTY)
        for t, u in zip(lookup.times, lookup.values, strict=True):
            if (i := position(t)) is not None and u == u:  # NaN (unknown) is not a measurement
                w = gpus_at.get(i) or 1.0
                weighted[i] += u * w
                weight[i] += w
    busy = array("d", (weighted[i] / weight[i] if weight[i] else math.nan for i in range(len(grid))))
    return Timeline(grid, array("d", held), busy)


def _positions(grid: Sequence[float]) -> Callable[[float], int | None]:
    """The index of a time on the (regular) grid, None for a time that is not one of its evaluations."""
    first = grid[0] if grid else 0.0
    step = grid[1] - grid[0] if len(grid) > 1 else 1.0

    def position(t: float) -> int | None:
        i = round((t - first) / step)
        return i if 0 <= i < len(grid) and grid[i] == t else None

    return position


def _mig(fb_mib: Mapping[Container, list[Series]], containers: Sequence[Container], timeline: Timeline,
         headroom: float, most_gpus: Mapping[Container, float]) -> mig.Fit | None:
    """The smallest MIG slice for a workload whose containers hold at most one GPU each (a slice is part of one)."""
    mine = [s for c in containers for s in fb_mib.get(c, ())]
    if not mine or max(timeline.gpus, default=0) <= 0 or any(most_gpus.get(c, 0) > 1 for c in containers):
        return None
    models = {s.labels.get("modelName", "") for s in mine}
    utilization = [u for u in timeline.utilization if u == u]  # not NaN
    if len(models) != 1 or not utilization:
        return None
    peak_fb = max(v for s in mine for v in s.values)
    return mig.smallest_fit(models.pop(), peak_fb_mib=peak_fb, peak_utilization=max(utilization), headroom=headroom)


def data_fb(data: NamespaceData) -> dict[Container, list[Series]]:
    """The framebuffer series (MiB, with `modelName`) by container."""
    found: dict[Container, list[Series]] = defaultdict(list)
    for s in data.fb_mib:
        found[(s.labels.get("pod", ""), s.labels.get("container", ""))].append(s)
    return found


def grouping_note(groupings: set[Grouping]) -> str:
    if groupings == {Grouping.OWNER_SERIES}:
        return "pods grouped by kube-state-metrics' owner series"
    said = ["pods grouped by kube-state-metrics' owner series"] if Grouping.OWNER_SERIES in groupings else []
    if Grouping.KUBECONFIG in groupings:
        said.append("by their ownerReferences in the cluster (--kubeconfig) where Prometheus has no owner series")
    if Grouping.POD_NAME in groupings:
        said.append("by their names where neither names them: a guess")
    return "; ".join(said) + "; marked per workload"
