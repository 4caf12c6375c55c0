"""What Prometheus's HTTP API v1 answers, read into frozen values: samples, series, alerting rules and their alerts.

Pure: it reads JSON documents already parsed (the client, prometheus.py, does the I/O). Shapes as upstream writes
them (prometheus/prometheus v2.42.0, web/api/v1/api.go `queryData`, `AlertDiscovery`, `RuleDiscovery`); a field of
the wrong type raises TypeError/ValueError/KeyError, which the client turns into one `PrometheusUnavailable`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

import msgspec

from reactor.core.errors import InvalidPayload
from reactor.intake.alerts import parse_time

# --- values --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant vector: its labels and its value at `at` (NaN and ±Inf kept as floats)."""

    labels: Mapping[str, str]
    value: float
    at: datetime


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a range query: its labels and its points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[datetime, float], ...]


class ActiveAlert(msgspec.Struct, frozen=True):
    """An alert a rule holds active: `state` "pending" or "firing"; `value` the rule expression's value for it at
    the rule's latest evaluation (NaN when the expression's value is NaN).

    Read by msgspec (`msgspec.convert`), validated field by field in C: an answer holding Prometheus's whole rule
    state (ten thousand active alerts in a large cluster) is read in milliseconds rather than a quarter second, and
    the numbers are parsed from their text only for the alerts a question matches."""

    labels: dict[str, str]
    state: Literal["pending", "firing", "inactive"]
    annotations: dict[str, str] = {}
    # Text, read as a time only where a question needs it: annotated `datetime`, msgspec would resolve the name on
    # first use, and a test that freezes time (freezegun) swaps every module's `datetime` for its fake class.
    active_at_text: str | None = msgspec.field(default=None, name="activeAt")
    value_text: str | float = msgspec.field(default="NaN", name="value")

    def __post_init__(self) -> None:
        float(self.value_text)  # "0.25", "1e+00", "NaN", "+Inf": Python's float reads every spelling Go prints

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def active_at(self) -> datetime | None:
        """None for Go's zero time (never active), a missing field, or one that is not an RFC 3339 time: unknown, so
        a pending alert is never taken as due."""
        try:
            return _time_or_none(self.active_at_text)
        except InvalidPayload:
            return None

    @property
    def value(self) -> float:
        return float(self.value_text)


@dataclass(frozen=True, slots=True)
class AlertingRule:
    """An alerting rule as Prometheus runs it: `duration` is its `for`, `alerts` its active alerts."""

    name: str
    query: str
    duration: timedelta
    state: str  # inactive | pending | firing
    health: str  # ok | err | unknown
    labels: Mapping[str, str]
    alerts: tuple[ActiveAlert, ...]
    keep_firing_for: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class RuleGroup:
    """A rule group: its evaluation `interval` and its alerting rules (recording rules are not asked for)."""

    name: str
    file: str
    interval: timedelta
    rules: tuple[AlertingRule, ...]
    last_evaluation: datetime | None = None


# --- the client ----------------------------------------------------------------------------------------------



# --- reading answers -----------------------------------------------------------------------------------------


def read_vector(data: Any) -> tuple[Sample, ...]:
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise ValueError(f"expected an instant vector, got resultType {str(data.get('resultType'))[:40]!r}")
    return tuple(Sample(_labels(s["metric"]), *_point(s["value"])[::-1]) for s in data["result"])


def read_matrix(data: Any) -> tuple[Series, ...]:
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise ValueError(f"expected a matrix, got resultType {str(data.get('resultType'))[:40]!r}")
    return tuple(Series(_labels(s["metric"]), tuple(_point(p) for p in s["values"])) for s in data["result"])


def read_rule_groups(data: Any) -> tuple[RuleGroup, ...]:
    groups = []
    for g in data["groups"]:
        rules = tuple(_alerting_rule(r) for r in g["rules"] if r.get("type") == "alerting")
        groups.append(RuleGroup(name=_str(g["name"]), file=_str(g.get("file", "")),
                                interval=_seconds(g["interval"]), rules=rules,
                                last_evaluation=_time_or_none(g.get("lastEvaluation"))))
    return tuple(groups)


def _alerting_rule(r: Mapping[str, Any]) -> AlertingRule:
    return AlertingRule(name=_str(r["name"]), query=_str(r["query"]), duration=_seconds(r.get("duration", 0)),
                        state=_str(r["state"]), health=_str(r.get("health", "unknown")),
                        labels=_labels(r.get("labels") or {}), alerts=_active(r.get("alerts") or ()),
                        keep_firing_for=_seconds(r.get("keepFiringFor", 0)))


def _active(alerts: Any) -> tuple[ActiveAlert, ...]:
    try:
        return msgspec.convert(alerts, type=tuple[ActiveAlert, ...])
    except msgspec.ValidationError as e:  # the client turns a ValueError into one `PrometheusUnavailable`
        raise ValueError(f"an active alert: {e}") from None


def read_buildinfo(data: Any) -> Mapping[str, str]:
    if not isinstance(data, dict) or not isinstance(data.get("version"), str):
        raise ValueError("not a buildinfo object (version)")
    return MappingProxyType({k: v for k, v in data.items() if isinstance(v, str)})


def _point(raw: Any) -> tuple[datetime, float]:
    stamp, value = raw
    return datetime.fromtimestamp(float(stamp), UTC), _float(value)


def _float(raw: Any) -> float:
    """Prometheus prints values as strings ("0.25", "1e+00", "NaN", "+Inf"); Python's float reads them all."""
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise TypeError(f"expected a number, got {type(raw).__name__}")
    return float(raw)


def _seconds(raw: Any) -> timedelta:
    value = _float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a duration in seconds, got {raw!r}")
    return timedelta(seconds=value)


def _time_or_none(raw: Any) -> datetime | None:
    if raw is None or raw == "" or raw == "0001-01-01T00:00:00Z":  # Go's zero time: never evaluated
        return None
    return parse_time("time", raw)


def _labels(raw: Any) -> Mapping[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise TypeError("expected labels: an object of strings")
    return MappingProxyType(dict(raw))


def _str(raw: Any) -> str:
    if not isinstance(raw, str):
        raise TypeError(f"expected a string, got {type(raw).__name__}")
    return raw



def unix(moment: datetime) -> str:
    """`moment` as the seconds API v1 takes (`time=`, `start=`, `end=`), to the millisecond."""
    if moment.tzinfo is None:
        raise ValueError("expected an aware datetime (UTC)")
    return f"{moment.timestamp():.3f}"
