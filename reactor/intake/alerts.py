"""Strict parsing of Alertmanager v4 webhook payloads into immutable `Alert` values.

An envelope that is not a valid v4 payload raises `InvalidPayload` naming the field, so the webhook answers 400
(Alertmanager does not retry a 4xx). An invalid alert inside a valid envelope is set aside with its error
(`parse_envelope`): the others are still decided. Unknown extra fields are ignored: newer Alertmanager releases
add some. This module does no I/O and knows no Kubernetes.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from reactor.core.alerts import target_labels
from reactor.core.errors import InvalidPayload
from reactor.core.memo import Memo
from reactor.core.model import Alert, Notification, Status

_STATUSES = tuple(s.value for s in Status)
STATUS_OF = {s.value: s for s in Status}
ZERO_TIME = "0001-01-01T00:00:00Z"
# RFC 3339 as Go prints it: fractional seconds up to nanoseconds, `Z` or an offset.
_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)
FINGERPRINT = re.compile(r"^[0-9a-f]{1,64}$")
MAX_LABEL_BYTES = 4096
CPU_THROTTLING = "cpu_throttling"
UNKNOWN = "unknown"


def parse_time(field: str, raw: Any) -> datetime:
    """An RFC 3339 timestamp as a UTC-aware datetime (nanoseconds truncated to microseconds)."""
    if not isinstance(raw, str):
        raise InvalidPayload(field, f"expected an RFC 3339 timestamp string, got {_kind(raw)}")
    try:
        return utc(raw)
    except ValueError as e:
        raise InvalidPayload(field, str(e)) from e


@functools.lru_cache(maxsize=4096)
def utc(raw: str) -> datetime:
    """Cached: the alerts of one notification mostly share their startsAt and endsAt spellings."""
    m = _TIME.match(raw)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {_clip(raw)!r}")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    micros = int((frac or "0").ljust(6, "0")[:6])
    offset = "+00:00" if zone in ("Z", "z") else zone
    try:
        stamp = datetime.fromisoformat(
            f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micros:06d}{offset}"
        )
        # An offset can carry a valid local time out of datetime's range (year 1 or 9999) in UTC.
        return stamp.astimezone(UTC)
    except (ValueError, OverflowError) as e:
        raise ValueError(f"not a valid date and time: {_clip(raw)!r}") from e


@dataclass(frozen=True, slots=True)
class InvalidAlert:
    """An alert of a valid envelope that is not a valid alert: its own outcome (`invalid-alert`, naming the field),
    while the rest of the notification is decided as if it were not there. What could be read of it (name,
    fingerprint, namespace, pod: strings only, clipped) names it in the answer."""

    index: int
    error: InvalidPayload
    name: str = ""
    fingerprint: str = ""
    starts_at: str = ""
    status: str = ""
    namespace: str | None = None
    pod: str | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    """A valid v4 envelope: the notification of its valid alerts, where each stood in the body (`positions`), and
    the invalid ones. A 4xx is for the envelope only: Alertmanager never retries one, so a single malformed alert
    answered 400 would cost every other alert of the group (another team's too)."""

    notification: Notification
    positions: tuple[int, ...]
    invalid: tuple[InvalidAlert, ...]

    @property
    def total(self) -> int:
        return len(self.positions) + len(self.invalid)


def parse_envelope(body: Any) -> Envelope:
    """Validate a decoded JSON body's envelope (`InvalidPayload` → 400: not an object, not version "4", `alerts`
    not a list, a top-level field of the wrong type) and each alert on its own."""
    fields, raw_alerts = _envelope(body)
    alerts: list[Alert] = []
    positions: list[int] = []
    invalid: list[InvalidAlert] = []
    for i, raw in enumerate(raw_alerts):
        try:
            alerts.append(parse_alert(raw, f"alerts[{i}]"))
            positions.append(i)
        except InvalidPayload as e:
            invalid.append(_invalid(i, raw, e))
    return Envelope(Notification(alerts=tuple(alerts), **fields), tuple(positions), tuple(invalid))


def parse_notification(body: Any) -> Notification:
    """Validate a decoded JSON body and return the `Notification` it describes; strict: any invalid alert raises
    (`reactor plan` reads a file a person wrote; the webhook uses `parse_envelope`)."""
    fields, raw_alerts = _envelope(body)
    return Notification(alerts=tuple(parse_alert(raw, f"alerts[{i}]") for i, raw in enumerate(raw_alerts)),
                        **fields)


def _envelope(body: Any) -> tuple[dict[str, Any], list[Any]]:
    if not isinstance(body, dict):
        raise InvalidPayload("(body)", f"expected a JSON object, got {_kind(body)}")
    if body.get("version") != "4":
        raise InvalidPayload("version", f'expected "4", got {_clip(repr(body.get("version")))}')
    status = Status(_choice(body, "status", _STATUSES, "(body)"))
    raw_alerts = body.get("alerts")
    if not isinstance(raw_alerts, list):
        raise InvalidPayload("alerts", f"expected a list, got {_kind(raw_alerts)}")
    truncated = body.get("truncatedAlerts", 0)
    if isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
        raise InvalidPayload("truncatedAlerts", f"expected a non-negative integer, got {_clip(repr(truncated))}")
    for key in ("groupLabels", "commonLabels", "commonAnnotations"):
        if key in body:
            _string_map(body[key], key)
    fields = dict(version="4", group_key=_string(body, "groupKey", "(body)"), status=status,
                  receiver=_string(body, "receiver", "(body)"), truncated_alerts=truncated,
                  external_url=_string(body, "externalURL", "(body)", required=False))
    return fields, raw_alerts


def _invalid(index: int, raw: Any, error: InvalidPayload) -> InvalidAlert:
    """What can be read of an invalid alert to name it: only strings, clipped (it may be anything)."""
    if not isinstance(raw, dict):
        return InvalidAlert(index, error)
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}

    def text(mapping: Any, key: str) -> str:
        value = mapping.get(key) if isinstance(mapping, dict) else None
        return _clip(value, 253) if isinstance(value, str) else ""

    return InvalidAlert(index, error, name=text(labels, "alertname"), fingerprint=text(raw, "fingerprint"),
                        starts_at=text(raw, "startsAt"), status=text(raw, "status"),
                        namespace=text(labels, "exported_namespace") or text(labels, "namespace") or None,
                        pod=text(labels, "exported_pod") or text(labels, "pod") or None)


def measures(annotations: Mapping[str, str], where: str) -> dict[str, Any]:
    """The numbers an alert's annotations carry (`gpus`, `idle_gpus`, `cpu_throttling`/`cpu_unknown`), read as
    the webhook reads them; `InvalidPayload` names a bad one. The confirm step (sources/confirm.py) reads them from
    the annotations Prometheus rendered for its own alert."""
    get = annotations.get
    try:
        return {"gpus": _whole("gpus", get("gpus")), "idle_gpus": _whole("idle_gpus", get("idle_gpus")),
                "cpu_throttling": None, "cpu_unknown": False, **_throttling(get(CPU_THROTTLING))}
    except _BadNumber as e:
        raise InvalidPayload(f"{where}.annotations.{e.key}", e.problem) from None


def parse_alert(raw: Any, where: str) -> Alert:
    """One alert, checked field by field in a fixed order (the first problem found is the one named); `where`
    names it in errors (`alerts[3]`). The webhook's notifications and the API v2 source (sources/alertmanager.py, which
    hands it each gettableAlert with the webhook's `status` spelling) both parse alerts here.

    This runs once per alert of every notification, so it keeps to plain lookups: repeated spellings
    (times, numbers) are parsed once through small caches, and nothing is formatted unless it is an error.
    """
    if not isinstance(raw, dict):
        raise InvalidPayload(where, f"expected an object, got {_kind(raw)}")
    labels = _string_map(raw.get("labels"), where, "labels")
    annotations = _string_map(raw.get("annotations", _NO_ANNOTATIONS), where, "annotations")
    name = labels.get("alertname")
    if not name:
        raise InvalidPayload(f"{where}.labels.alertname", "missing: every alert has an alertname label")
    fingerprint = raw.get("fingerprint")
    if not isinstance(fingerprint, str):
        fingerprint = _string(raw, "fingerprint", where)  # raises, naming the field
    if not FINGERPRINT.match(fingerprint):
        raise InvalidPayload(f"{where}.fingerprint", f"expected lowercase hex, got {_clip(fingerprint)!r}")
    ends_raw = raw.get("endsAt", ZERO_TIME)
    ends_at = None if ends_raw == ZERO_TIME else parse_time(f"{where}.endsAt", ends_raw)
    raw_status = raw.get("status")
    # Type first: a lookup by an unhashable value (a list, an object) would raise TypeError, a 500, not a 400.
    status = STATUS_OF.get(raw_status) if isinstance(raw_status, str) else None
    if status is None:
        _choice(raw, "status", _STATUSES, where)  # raises, naming the field
    starts = raw.get("startsAt")
    starts_at = _time(where, "startsAt", starts) if isinstance(starts, str) else parse_time(f"{where}.startsAt", starts)
    generator_url = raw.get("generatorURL")
    if not isinstance(generator_url, str):
        generator_url = _string(raw, "generatorURL", where, required=False)
    return build_alert(name, status, labels, annotations, starts_at, ends_at, fingerprint,  # type: ignore[arg-type]
                       generator_url, where)


def build_alert(name: str, status: Status, labels: dict[str, str], annotations: dict[str, str],
                starts_at: datetime, ends_at: datetime | None, fingerprint: str, generator_url: str,
                where: str) -> Alert:
    """The `Alert` of fields already checked, its numbers read last (`InvalidPayload` names a bad one): the one
    place both readings of an alert end (`parse_alert`, and intake/wire.py's decoding of the common case).

    A resolve's numbers are read but never required: nothing sizes a revert by them (it undoes the reactor's own
    recorded change), and Alertmanager sends a resolve once. Refused as `invalid-alert` for a number Prometheus
    could not render (a template error prints `<error expanding template: …>` in its place), the revert it was
    due would wait for a resolve that never comes. So a resolve's unreadable number is left unknown.

    `labels` and `annotations` are read here as the dicts they were decoded into (a read-only view's lookups cost
    twice a dict's, and an alert's picking does a dozen), then kept behind read-only views."""
    try:
        numbers = _numbers(annotations, where) if annotations else _NOTHING
    except InvalidPayload:
        if status is not Status.RESOLVED:
            raise
        numbers = _NOTHING
    namespace, pod, container = target_labels(labels)
    return Alert(
        name=name,
        status=status,
        labels=MappingProxyType(labels),
        annotations=MappingProxyType(annotations),
        starts_at=starts_at,
        ends_at=ends_at,
        fingerprint=fingerprint,
        generator_url=generator_url,
        namespace=namespace,
        pod=pod,
        container=container,
        **numbers,
    )


def _numbers(annotations: Mapping[str, str], where: str) -> dict[str, Any]:
    """The fields an alert's number annotations give; `InvalidPayload` names the first bad one.

    Remembered by the four spellings: the rules print each number with few digits, so the alerts of a notification
    repeat few combinations. Only short spellings are kept (`KEPT_SPELLING`, all four together), so a sender cannot
    fill the memo with long ones; the dict kept is shared between alerts, and only ever spread into `Alert`."""
    get = annotations.get
    spelled = (get("value"), get("gpus"), get("idle_gpus"), get(CPU_THROTTLING))
    found = _NUMBERS.get(spelled)
    if found is not None:
        return found
    try:
        found = _read_numbers(*spelled)
    except _BadNumber as e:
        raise InvalidPayload(f"{where}.annotations.{e.key}", e.problem) from None
    if sum(len(raw) for raw in spelled if raw) <= KEPT_SPELLING:
        _NUMBERS.keep(spelled, found)
    return found


NUMBERS_KEPT = 4096
KEPT_SPELLING = 64  # characters, the four spellings together
_NUMBERS: Memo[tuple[str | None, ...], dict[str, Any]] = Memo(NUMBERS_KEPT)


def _read_numbers(value: str | None, gpus: str | None, idle: str | None, throttling: str | None) -> dict[str, Any]:
    return {"value": _reading("value", value), "gpus": _whole("gpus", gpus), "idle_gpus": _whole("idle_gpus", idle),
            **_throttling(throttling)}


class _BadNumber(Exception):
    """A number annotation that cannot be read: `key` names it, `problem` says why (the caller adds where)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


_NO_ANNOTATIONS: dict[str, str] = {}
_NOTHING: dict[str, Any] = {}


def _time(where: str, key: str, raw: str) -> datetime:
    try:
        return utc(raw)
    except ValueError as e:
        raise InvalidPayload(f"{where}.{key}", str(e)) from e


def _throttling(raw: str | None) -> dict[str, Any]:
    """`cpu_throttling`: a 0-1 ratio, or "unknown" (or NaN) when the rules found no cAdvisor series.

    Absent (rules without the CPU half) leaves both fields unset: nothing is known, nothing is claimed.
    """
    if raw is None or raw == "":
        return _NOTHING
    if raw.strip().lower() == UNKNOWN:
        return {"cpu_unknown": True}
    value = _reading(CPU_THROTTLING, raw)
    if value is None:
        return {"cpu_unknown": True}
    return {"cpu_throttling": min(value, 1.0)}  # rate() extrapolation can nudge a ratio past 1


def _reading(key: str, raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        # Only short spellings go through the memo: a sender posting long valid numbers must not fill it.
        return _float(raw) if len(raw) <= KEPT_SPELLING else _float.__wrapped__(raw)
    except ValueError as e:
        raise _BadNumber(key, str(e)) from None


@functools.lru_cache(maxsize=4096)
def _float(raw: str) -> float | None:
    """A number annotation's value (None: NaN, "unknown"); cached: one notification repeats a few spellings."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"expected a number, got {_clip(raw)!r}") from None
    if math.isnan(value):
        # The rules print NaN when nothing was ever measured: unknown, never "idle".
        return None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a finite number >= 0, got {_clip(raw)!r}")
    return value


def _whole(key: str, raw: str | None) -> int | None:
    value = _reading(key, raw)
    if value is None:
        return None
    if not value.is_integer() or value > 1_000_000:
        raise _BadNumber(key, f"expected a whole number, got {_clip(raw or '')!r}")
    return int(value)


def _string_map(raw: Any, where: str, key: str = "") -> dict[str, str]:
    """An object of strings (labels, annotations), checked; `where` + `key` names the field."""
    if not isinstance(raw, dict):
        raise InvalidPayload(f"{where}.{key}" if key else where, f"expected an object of strings, got {_kind(raw)}")
    # The common case in loops that run in C: every value a str, no key or value too long.
    if raw and not short_strings(raw):
        field = f"{where}.{key}" if key else where
        for name, value in raw.items():  # find the first offender, to name it
            if not isinstance(value, str):
                raise InvalidPayload(f"{field}.{_clip(name)}", f"expected a string, got {_kind(value)}")
            if len(name) > MAX_LABEL_BYTES or len(value) > MAX_LABEL_BYTES:
                raise InvalidPayload(f"{field}.{_clip(name)}", f"longer than {MAX_LABEL_BYTES} characters")
    return raw


def short_strings(raw: dict[Any, Any]) -> bool:
    """True when every value is a str and no key or value is longer than the limit; False may be either way.

    Both joins run in C: joining fails on a value that is not a str, and keys or values that all fit
    within the limit together each fit within it (the usual case by far; the rest is checked one by one).
    """
    try:
        return len("".join(raw.values())) <= MAX_LABEL_BYTES and len("".join(raw)) <= MAX_LABEL_BYTES
    except TypeError:
        return False


def _string(raw: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        field = key if where == "(body)" else f"{where}.{key}"
        problem = "missing" if value is None else f"expected a string, got {_kind(value)}"
        raise InvalidPayload(field, problem)
    return value


def _choice(raw: dict[str, Any], key: str, options: tuple[str, ...], where: str) -> str:
    value = raw.get(key)
    if value not in options:
        field = key if where == "(body)" else f"{where}.{key}"
        raise InvalidPayload(field, f"expected one of {', '.join(options)}, got {_clip(repr(value))}")
    return str(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _clip(text: str, limit: int = 80) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"
