"""Fold the alerts of one notification that target one workload into one `Signal`.

Pure. One workload gets one decision per notification, so when several alert names target it
the most urgent wins: missing metrics always hold, and starving beats wasting (a GPU starved by
its CPU first: its low GPU use is the CPU's fault, so it must not read as waste).
"""

from __future__ import annotations

from collections.abc import Sequence

from reactor.core.model import Alert, AlertName, Signal, Status, iso

PRECEDENCE: tuple[str, ...] = (
    AlertName.METRICS_MISSING.value,
    AlertName.STARVED_BY_CPU.value,
    AlertName.NEAR_MEMORY_LIMIT.value,
    AlertName.SATURATED.value,
    AlertName.MEMORY_SATURATED.value,
    AlertName.UNDERUTILIZED.value,
    AlertName.IDLE.value,
)


def fold(alerts: Sequence[Alert]) -> Signal:
    """One Signal from the alerts on one workload; `ValueError` on an empty sequence.

    The name: among names with a firing alert, by `PRECEDENCE` (unknown names last, then by
    name); only when nothing fires, the same order over the resolved ones, which may revert.
    A firing signal is built from the firing alerts only: a resolved alert still re-sent in the
    group must neither lend its stale value nor its key (its key would make a new firing look
    already applied). The order of `alerts` does not matter (a property test permutes them).
    """
    if len(alerts) == 1:
        return _one(alerts[0])
    return fold_many(alerts)


def _one(a: Alert) -> Signal:
    """What `fold_many` makes of one alert, without its sorting and grouping: most notifications name one alert per
    workload (a property test holds the two equal)."""
    return Signal(
        alert=a.name,
        status=Status.FIRING if a.firing else Status.RESOLVED,
        keys=(a.key,),
        container=a.container or None,
        value=a.value,
        gpus=a.gpus,
        idle_gpus=a.idle_gpus,
        pods=(a.pod,) if a.pod else (),
        starts_at=a.key[1],
        fingerprint=a.fingerprint,
        cpu_throttling=a.cpu_throttling,
        cpu_unknown=bool(a.cpu_unknown),
    )


def fold_many(alerts: Sequence[Alert]) -> Signal:
    """`fold` for any number of alerts (see `fold`)."""
    if not alerts:
        raise ValueError("fold needs at least one alert")
    firing = [a for a in alerts if a.firing]
    pool = firing or list(alerts)
    name = min({a.name for a in pool}, key=_rank)
    chosen = [a for a in pool if a.name == name]
    first = min(chosen, key=lambda a: (a.starts_at, a.fingerprint))  # the oldest firing names the episode
    values = [a.value for a in chosen if a.value is not None]
    gpus = [a.gpus for a in chosen if a.gpus is not None]
    idle = [a.idle_gpus for a in chosen if a.idle_gpus is not None]
    throttling = [a.cpu_throttling for a in chosen if a.cpu_throttling is not None]
    return Signal(
        alert=name,
        status=Status.FIRING if firing else Status.RESOLVED,
        keys=_keys(chosen),
        container=_container(chosen),
        value=max(values) if values else None,
        gpus=max(gpus) if gpus else None,
        idle_gpus=min(idle) if idle else None,
        pods=tuple(sorted({a.pod for a in chosen if a.pod})),
        starts_at=first.key[1],
        fingerprint=first.fingerprint,
        cpu_throttling=max(throttling) if throttling else None,
        cpu_unknown=any(a.cpu_unknown for a in chosen),
    )


def _keys(alerts: Sequence[Alert]) -> tuple[tuple[str, str], ...]:
    """Every `Alert.key`, sorted; each distinct startsAt is spelled once (a pod's alerts share a few)."""
    return tuple(sorted({(a.fingerprint, iso(a.starts_at)) for a in alerts}))


def _rank(name: str) -> tuple[int, str]:
    return (PRECEDENCE.index(name) if name in PRECEDENCE else len(PRECEDENCE), name)


def _container(alerts: Sequence[Alert]) -> str | None:
    """The container all alerts name; when they disagree, that of the oldest firing naming one (by startsAt, then
    fingerprint, then name): the same whatever order Alertmanager listed the alerts in."""
    named = sorted((a.starts_at, a.fingerprint, a.container) for a in alerts if a.container)
    return named[0][2] if named else None
