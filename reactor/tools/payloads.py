"""Builds Alertmanager v4 webhook bodies the way Alertmanager 0.25 does (see tests/samples).

Used by the demo, `plan` examples, the load generator and tests, so that what the reactor is
fed outside production has the real shape: sorted alerts, common labels and annotations,
the group key, and fingerprints computed as Alertmanager computes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_SEP = 0xFF
ZERO_TIME = "0001-01-01T00:00:00Z"


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's label-set fingerprint: FNV-1a 64 over sorted `name 0xff value 0xff`."""
    h = _FNV_OFFSET
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode("utf-8"):
                h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
            h = ((h ^ _SEP) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class AlertSpec:
    """One alert as the rules produce it; `extra_labels` adds e.g. `exported_*` spellings."""

    name: str
    namespace: str
    pod: str
    container: str
    value: float | None = None
    gpus: int | None = None
    status: str = "firing"
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    extra_annotations: Mapping[str, str] = field(default_factory=dict)  # e.g. cpu_throttling

    def labels(self) -> dict[str, str]:
        labels = {"alertname": self.name, "namespace": self.namespace, "pod": self.pod,
                  "container": self.container, "reactor": "gpu", "severity": "warning"}
        labels.update(self.extra_labels)
        return labels


def alert_body(spec: AlertSpec, now: datetime,
               prometheus: str = "http://prometheus.monitoring.svc:9090") -> dict[str, Any]:
    annotations = {
        "summary": f"GPUs of {spec.namespace}/{spec.pod} fired {spec.name}",
        "description": f"Container {spec.container} of pod {spec.namespace}/{spec.pod} fired {spec.name}.",
        "runbook_url": f"https://runbooks.example.com/gpu-reactor/{spec.name}",
    }
    if spec.value is not None:
        annotations["value"] = f"{spec.value:.2f}"
    if spec.gpus is not None:
        annotations["gpus"] = str(spec.gpus)
    annotations.update(spec.extra_annotations)
    labels = spec.labels()
    ends = ZERO_TIME if spec.status == "firing" else rfc3339(spec.ends_at or now)
    return {
        "status": spec.status,
        "labels": labels,
        "annotations": dict(sorted(annotations.items())),
        "startsAt": rfc3339(spec.starts_at or now),
        "endsAt": ends,
        "generatorURL": f"{prometheus}/graph?g0.expr={spec.name}&g0.tab=1",
        "fingerprint": fingerprint(labels),
    }


def notification(specs: Iterable[AlertSpec], now: datetime | None = None, *, receiver: str = "gpu-reactor",
                 group_by: tuple[str, ...] = ("alertname", "namespace")) -> dict[str, Any]:
    """A webhook body grouping `specs` as a route with `group_by` would."""
    now = now or datetime.now(UTC)
    alerts = sorted((alert_body(s, now) for s in specs), key=lambda a: sorted(a["labels"].items()))
    common_labels = _common([a["labels"] for a in alerts])
    group_labels = {k: common_labels[k] for k in sorted(group_by) if k in common_labels}
    inner = ", ".join(f'{k}="{v}"' for k, v in group_labels.items())
    return {
        "receiver": receiver,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "alerts": alerts,
        "groupLabels": group_labels,
        "commonLabels": common_labels,
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": "http://alertmanager.monitoring.svc:9093",
        "version": "4",
        "groupKey": '{}/{reactor="gpu"}:{' + inner + "}",
        "truncatedAlerts": 0,
    }


def _common(maps: list[dict[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first = maps[0]
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in maps[1:])}
