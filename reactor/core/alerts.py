"""Immutable values of what Alertmanager delivers: the alert names the reactor understands, an alert, a
notification. Data only (re-exported by model.py, where every layer finds the shared values).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import msgspec

from reactor.core.memo import Memo


class AlertName(enum.StrEnum):
    """The alert names the rules emit and the reactor understands."""

    UNDERUTILIZED = "GPUUnderutilized"
    IDLE = "GPUIdle"
    SATURATED = "GPUSaturated"
    MEMORY_SATURATED = "GPUMemorySaturated"
    METRICS_MISSING = "GPUMetricsMissing"
    STARVED_BY_CPU = "GPUStarvedByCPU"
    NEAR_MEMORY_LIMIT = "GPUContainerNearMemoryLimit"


KNOWN_ALERTS = frozenset(a.value for a in AlertName)
# What `reactor doctor --send-test-alert` posts through Alertmanager to prove the route ends here: counted in
# reactor_alerts_received_total under its own name and answered with the `test-alert` skip, never acted on.
TEST_ALERT = "GPUReactorTestAlert"


class Status(enum.StrEnum):
    """An alert's (and a notification's) status, as Alertmanager spells it."""

    FIRING = "firing"
    RESOLVED = "resolved"


class Alert(msgspec.Struct, frozen=True, gc=False):
    """One alert of an Alertmanager v4 notification, with the workload labels already picked.

    `namespace`, `pod` and `container` prefer the `exported_*` spelling: when the
    exporter's own target labels were kept, the plain ones name the exporter.

    A frozen msgspec Struct rather than a frozen dataclass: one is built for every alert of every notification (and
    again when the confirm step sizes it), and a frozen dataclass's `__init__` sets its sixteen fields one
    `object.__setattr__` at a time, several times the cost. Equality, immutability and keyword construction are the
    same; `msgspec.structs.replace` replaces fields. Untracked by the cycle collector (`gc=False`): it holds only
    strings, numbers, times and read-only string maps, never itself.
    """

    name: str
    status: Status
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: datetime
    ends_at: datetime | None
    fingerprint: str
    generator_url: str = ""
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None
    value: float | None = None  # measured utilization, 0-1 ratio
    gpus: int | None = None
    idle_gpus: int | None = None
    # The container's CPU throttling ratio (0-1) from the `cpu_throttling` annotation; None when absent
    # or "unknown". `cpu_unknown`: the rules measure CPU but had no cAdvisor series (never "not throttled").
    cpu_throttling: float | None = None
    cpu_unknown: bool = False

    @property
    def firing(self) -> bool:
        return self.status == Status.FIRING

    @property
    def key(self) -> tuple[str, str]:
        """Identity of one firing: the fingerprint alone repeats when the alert fires again."""
        return (self.fingerprint, iso(self.starts_at))


def target_labels(labels: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(namespace, pod, container) an alert's labels name, `exported_*` first: when the exporter's own target labels
    were kept, the plain ones name the exporter. The webhook's parser and the confirm step's key of Prometheus's own
    alerts both read them here, so the two always name an alert alike."""
    get = labels.get
    return (get("exported_namespace") or get("namespace") or None, get("exported_pod") or get("pod") or None,
            get("exported_container") or get("container") or None)


SPELLINGS_KEPT = 1024
# Each datetime spelled lately, by identity: the parser hands the alerts of one startsAt the same datetime object (its
# `utc` cache), so a lookup by `id` finds it without hashing a datetime (which asks it for its offset). The entry holds
# the object, so its id cannot be reused while the entry lives.
_SPELLED: Memo[int, tuple[datetime, str]] = Memo(SPELLINGS_KEPT)


def iso(moment: datetime) -> str:
    """`moment.isoformat()`, remembered: the alerts of a notification share a few startsAt, each spelled per alert
    (its key, its outcome)."""
    known = _SPELLED.get(id(moment))
    if known is not None and known[0] is moment:
        return known[1]
    return _SPELLED.keep(id(moment), (moment, moment.isoformat()))[1]


@dataclass(frozen=True, slots=True)
class Notification:
    """One webhook request body."""

    version: str
    group_key: str
    status: Status
    receiver: str
    truncated_alerts: int
    alerts: tuple[Alert, ...]
    external_url: str = ""
