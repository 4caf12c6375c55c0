"""Builders for the policy tests: readable defaults, one keyword per thing a case changes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor.core.model import Alert, Bounds, Container, Quota, Signal, Workload, WorkloadRef
from reactor.policy.values import Policy
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, read_state

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
STARTS = "2025-03-01T11:00:00+00:00"
KEY = ("fp-a", STARTS)
POLICY = Policy(allow=("*",))


def signal(alert: str = "GPUUnderutilized", *, status: str = "firing", value: float | None = None,
           container: str | None = "server", keys: tuple[tuple[str, str], ...] = (KEY,)) -> Signal:
    fingerprint, starts_at = keys[0] if keys else ("", "")
    return Signal(alert=alert, status=status, keys=keys, container=container, value=value,
                  fingerprint=fingerprint, starts_at=starts_at)


def workload(*, kind: str = "Deployment", gpus: int | None = 4, replicas: int | None = 2,
             containers: tuple[Container, ...] | None = None, priority: str | None = "medium-priority-gpu",
             surge: int = 1, hpa: bool = False, generation: int = 3, observed: int = 3,
             updated: int | None = None, annotations: Mapping[str, str] | None = None) -> Workload:
    if containers is None:
        containers = (Container("server", gpus or 0), Container("sidecar", 0))
    if kind == "CronJob":
        replicas = None
    annotations = dict(annotations or {})
    return Workload(
        ref=WorkloadRef(kind, "ml", "trainer"), resource_version="42", containers=containers,
        priority_class=priority, replicas=replicas, generation=generation, observed_generation=observed,
        updated_replicas=replicas if updated is None else updated, max_surge=surge, hpa_managed=hpa,
        state=read_state(annotations), annotations=annotations,
    )


def bounds(*, lr_min: int | None = None, lr_max: int | None = None, hard: int | None = None, used: int = 0,
           quotas: tuple[Quota, ...] = (), default_class: str | None = None) -> Bounds:
    """`hard`/`used`: one unscoped quota named gpu-quota; `quotas`: any others, scoped or not."""
    unscoped = (Quota("gpu-quota", hard, used),) if hard is not None else ()
    return Bounds(min_gpus=lr_min, max_gpus=lr_max, quotas=unscoped + quotas, default_priority_class=default_class)


def last_action(action: str, direction: str, *, ago: timedelta, key: tuple[str, str] = KEY,
                container: str | None = None, from_value: Any = None, to_value: Any = None) -> dict[str, str]:
    """The `last-action` annotation as the reactor writes it."""
    doc = {"action": action, "direction": direction, "container": container, "from": from_value,
           "to": to_value, "alert": "GPUSaturated", "fingerprint": key[0], "startsAt": key[1],
           "time": (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {LAST_ACTION: json.dumps(doc)}


def cooldown(*, until: timedelta) -> dict[str, str]:
    return {COOLDOWN_UNTIL: (NOW + until).strftime("%Y-%m-%dT%H:%M:%SZ")}


def original(**values: Any) -> dict[str, str]:
    return {ORIGINAL: json.dumps(values)}


def alert(name: str = "GPUUnderutilized", *, fingerprint: str = "fp-a", status: str = "firing",
          starts: str = "2025-03-01T11:00:00", value: float | None = None, container: str | None = "server",
          pod: str | None = "trainer-1") -> Alert:
    return Alert(
        name=name, status=status, labels={"alertname": name}, annotations={},
        starts_at=datetime.fromisoformat(starts).replace(tzinfo=UTC), ends_at=None,
        fingerprint=fingerprint, namespace="ml", pod=pod, container=container, value=value,
    )
