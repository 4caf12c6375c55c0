"""What the policy would have done: the would-be alerts of one namespace, notification by notification, through
the reactor's own `decide`. Pure: no I/O, no clock (each decision's `now` is the notification's time).

Each workload is modelled from its history (containers, GPUs per pod, replicas, PriorityClass at that time) with
the would-be changes laid over it: once an action sets a container to 1 GPU, the model holds 1 GPU whatever the
history says, and the state the act step would have written with it (last action, cooldown, original, from
state/annotations.py `state_annotations`) is what the next decision reads — so cooldown, hysteresis,
already-applied and revert behave as they would have. Notifications come as `notification_times` says (as if the
reactor were enabled at the window's start); each carries the alerts of that workload that fire then, parsed by the
webhook's own parser.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reactor.core.model import (
    Action,
    Bounds,
    Container,
    Kind,
    ReactorState,
    Skip,
    SkipReason,
    Workload,
    WorkloadRef,
)
from reactor.intake.alerts import parse_alert
from reactor.policy import decide, fold
from reactor.policy.values import Policy
from reactor.state.annotations import GPUS, PRIORITY_CLASS, REPLICAS, original_key, read_state, state_annotations
from reactor.tools.payloads import ZERO_TIME, fingerprint
from reactor.tools.report.model import Decision, Episode, WorkloadKey


@dataclass(frozen=True, slots=True)
class Fired:
    """A would-be alert episode with what its notification carries: the rule's labels and the annotations'
    values at the time it fired."""

    episode: Episode
    namespace: str
    rule_labels: Mapping[str, str]
    gpus: int | None
    idle_gpus: int | None
    cpu_throttling: str | None = None  # the `cpu_throttling` annotation ("0.120", "unknown"), where the rule has it


@dataclass(frozen=True, slots=True)
class Shape:
    """A workload as its history shows it at one time: GPUs per pod of each container, replicas, PriorityClass."""

    containers: Mapping[str, int]
    replicas: int
    priority_class: str | None


@dataclass(slots=True)
class Subject:
    """One workload to replay: its episodes and its shape over time."""

    key: WorkloadKey
    fired: Sequence[Fired]
    shape: Callable[[float], Shape]
    overrides: dict[str, object] = field(default_factory=dict)  # "gpus/<container>", "replicas", "priority"
    annotations: dict[str, str] = field(default_factory=dict)


def alert_body(fired: Fired, *, resolved_at: datetime | None) -> dict[str, object]:
    """The alert as Alertmanager's webhook sends it (status, labels, annotations, startsAt, endsAt, fingerprint)."""
    e = fired.episode
    labels = {"alertname": e.alert, **fired.rule_labels, "namespace": fired.namespace, "pod": e.pod,
              "container": e.container}
    annotations = {"value": f"{e.value:.3f}"}
    if fired.gpus is not None:
        annotations["gpus"] = str(fired.gpus)
    if fired.idle_gpus is not None:
        annotations["idle_gpus"] = str(fired.idle_gpus)
    if fired.cpu_throttling is not None:
        annotations["cpu_throttling"] = fired.cpu_throttling
    return {"status": "resolved" if resolved_at is not None else "firing", "labels": labels,
            "annotations": annotations, "startsAt": _iso(e.fired_at),
            "endsAt": _iso(resolved_at) if resolved_at is not None else ZERO_TIME,
            "generatorURL": "", "fingerprint": fingerprint(labels)}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def notification_times(fired: Sequence[Fired], *, since: float, until: float, repeat: float) -> set[float]:
    """When the reactor would have heard, had it been enabled at `since`: an alert already firing then at `since`
    (a new route's group notifies what is active), one that starts later when it fires; again every `repeat`
    while it fires, and when it resolves."""
    times: set[float] = set()
    for f in fired:
        start = f.episode.fired_at.timestamp()
        end = f.episode.resolved_at.timestamp() if f.episode.resolved_at is not None else until
        t = max(start, since)
        while t < end and t <= until:
            times.add(t)
            t += repeat
        if f.episode.resolved_at is not None and since <= end <= until:
            times.add(end)
    return times


def bodies_at(fired: Sequence[Fired], t: float) -> list[dict[str, object]]:
    """The workload's alerts in a notification at `t`: those firing then, and those resolving at `t`."""
    found = []
    for f in fired:
        start = f.episode.fired_at.timestamp()
        end = f.episode.resolved_at.timestamp() if f.episode.resolved_at is not None else None
        if start <= t and (end is None or t < end):
            found.append(alert_body(f, resolved_at=None))
        elif end == t:
            found.append(alert_body(f, resolved_at=f.episode.resolved_at))
    return found


def envelope(alerts: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """A webhook notification (payload version 4) carrying `alerts`, as `reactor plan --alerts` reads one."""
    firing = any(a.get("status") == "firing" for a in alerts)
    return {"version": "4", "groupKey": "{}:{reactor=\"gpu\"}", "truncatedAlerts": 0,
            "status": "firing" if firing else "resolved", "receiver": "gpu-reactor", "groupLabels": {},
            "commonLabels": {}, "commonAnnotations": {}, "externalURL": "", "alerts": list(alerts)}


def workload_at(subject: Subject, t: float) -> Workload:
    """The modelled workload: history at `t`, the would-be changes over it, the would-be state on it."""
    shape = subject.shape(t)
    containers = tuple(Container(name, int(subject.overrides.get(f"gpus/{name}", gpus)))  # type: ignore[call-overload]
                       for name, gpus in sorted(shape.containers.items()))
    replicas = int(subject.overrides.get("replicas", shape.replicas))  # type: ignore[call-overload]
    priority = subject.overrides.get("priority", shape.priority_class)
    kind = subject.key.kind
    surge = -(-replicas // 4) if kind == Kind.DEPLOYMENT else 0  # maxSurge 25 %, rounded up (the default)
    state: ReactorState = read_state(subject.annotations)
    return Workload(ref=WorkloadRef(kind, subject.key.namespace, subject.key.name), resource_version="1",
                    containers=containers, priority_class=priority if isinstance(priority, str) and priority else None,
                    replicas=None if kind == Kind.CRONJOB else replicas, max_surge=surge, state=state,
                    annotations=dict(subject.annotations), uid=f"report:{subject.key}")


def replay(subjects: Sequence[Subject], bounds_at: Callable[[float, int], Bounds], policy: Policy, *,
           since: float, until: float, repeat: float) -> dict[WorkloadKey, list[Decision]]:
    """Every notification of one namespace, in time order; `bounds_at(t, gpus_changed)` is the namespace's GPU
    bounds at `t` with the would-be changes so far (`gpus_changed`, net) counted in the quotas' use."""
    decisions: dict[WorkloadKey, list[Decision]] = {s.key: [] for s in subjects}
    events = sorted((t, s.key) for s in subjects
                    for t in notification_times(s.fired, since=since, until=until, repeat=repeat))
    by_key = {s.key: s for s in subjects}
    changed = 0
    for t, key in events:
        subject = by_key[key]
        bodies = bodies_at(subject.fired, t)
        if not bodies:
            continue
        alerts = [parse_alert(body, f"alerts[{i}]") for i, body in enumerate(bodies)]
        signal = fold(alerts)
        now = datetime.fromtimestamp(t, UTC)
        workload = workload_at(subject, t)
        if not policy.namespace_allowed(key.namespace):
            result: Action | Skip = Skip(SkipReason.NAMESPACE_NOT_ALLOWED,
                                         f"namespace {key.namespace!r} is not in the allow list")
        else:
            result = decide(signal, workload, bounds_at(t, changed), policy, now)
        if isinstance(result, Action):
            _apply(subject, result)
            for k, v in state_annotations(result, signal, workload, policy.cooldown, now).items():
                if v is None:
                    subject.annotations.pop(k, None)
                else:
                    subject.annotations[k] = v
            changed += result.gpu_delta
        decisions[key].append(_decision(now, signal.alert, signal.status.value, result, bodies))
    return decisions


def _apply(subject: Subject, action: Action) -> None:
    dimension = original_key(action.strategy)
    if dimension == GPUS and action.container is not None:
        subject.overrides[f"gpus/{action.container}"] = action.to_value
    elif dimension == REPLICAS:
        subject.overrides["replicas"] = action.to_value
    elif dimension == PRIORITY_CLASS:
        subject.overrides["priority"] = action.to_value


def _decision(now: datetime, alert: str, status: str, result: Action | Skip,
              bodies: Sequence[Mapping[str, object]]) -> Decision:
    if isinstance(result, Action):
        return Decision(now, alert, status, result.action, result.strategy, result.from_value, result.to_value,
                        result.gpu_delta, None, "", tuple(bodies))
    return Decision(now, alert, status, None, None, None, None, 0, result.reason.value, result.detail, tuple(bodies),
                    result.shortfall)


__all__ = ["Fired", "Shape", "Subject", "alert_body", "envelope", "fingerprint", "replay"]
