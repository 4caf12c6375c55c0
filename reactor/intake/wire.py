"""The common case of a webhook body, decoded and typed in one pass in C: a valid v4 envelope of valid alerts.

Every notification Alertmanager sends is one of these, and the webhook's cost per alert was mostly reading it:
`json.loads` building every dict and string, then `parse_envelope` checking each field's type in Python. msgspec
decodes the body straight into the typed shape below (unknown fields skipped, as Alertmanager adds some), so what is
left to check here is only what a type cannot say: the version, the status spellings, the fingerprint's hex, the
times, the label lengths and the annotations' numbers — the same checks, through the same helpers, as
`parse_alert`, ending in the same `build_alert`.

Anything else — a body that is not UTF-8 JSON of this shape, a field of another type, one alert that fails a check —
returns None, and the caller reads the body the careful way (`json.loads`, then `parse_envelope`), which names the
field and sets an invalid alert aside on its own. So this path changes the cost, never the answer: the tests hold
the two readings equal on valid and broken bodies alike.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from reactor.core.errors import InvalidPayload
from reactor.core.model import Alert, Notification
from reactor.intake.alerts import FINGERPRINT, MAX_LABEL_BYTES, STATUS_OF, ZERO_TIME, Envelope, build_alert, utc

# A label or annotation key or value within the limit `parse_alert` holds them to, checked as they are decoded (msgspec
# counts characters, as `len` does).
_Short = Annotated[str, msgspec.Meta(max_length=MAX_LABEL_BYTES)]
_Map = dict[_Short, _Short]


class _Alert(msgspec.Struct, gc=False):
    labels: _Map
    fingerprint: str
    status: str
    startsAt: str
    annotations: _Map = msgspec.field(default_factory=dict)
    endsAt: str = ZERO_TIME
    generatorURL: str = ""


class _Envelope(msgspec.Struct):
    version: str
    groupKey: str
    status: str
    receiver: str
    alerts: list[_Alert]
    truncatedAlerts: int = 0
    externalURL: str = ""
    groupLabels: _Map = msgspec.field(default_factory=dict)
    commonLabels: _Map = msgspec.field(default_factory=dict)
    commonAnnotations: _Map = msgspec.field(default_factory=dict)


_decode = msgspec.json.Decoder(_Envelope).decode


def read_envelope(body: bytes) -> Envelope | None:
    """The body's envelope when it is the common case, every alert valid; None when it needs the careful reading."""
    try:
        wire = _decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # too deep: the careful reading says so
        return None
    status = STATUS_OF.get(wire.status)
    if wire.version != "4" or status is None or wire.truncatedAlerts < 0:
        return None
    try:
        alerts = tuple(_alert(a, i) for i, a in enumerate(wire.alerts))
    except InvalidPayload:
        return None
    notification = Notification(version="4", group_key=wire.groupKey, status=status, receiver=wire.receiver,
                                truncated_alerts=wire.truncatedAlerts, alerts=alerts, external_url=wire.externalURL)
    return Envelope(notification, tuple(range(len(alerts))), ())


def _alert(wire: _Alert, index: int) -> Alert:
    labels, annotations = wire.labels, wire.annotations
    name = labels.get("alertname")
    status = STATUS_OF.get(wire.status)
    if not name or status is None or not FINGERPRINT.match(wire.fingerprint):
        raise InvalidPayload(f"alerts[{index}]", "needs the careful reading")
    try:
        ends_at = None if wire.endsAt == ZERO_TIME else utc(wire.endsAt)
        starts_at = utc(wire.startsAt)
    except ValueError as e:
        raise InvalidPayload(f"alerts[{index}]", str(e)) from e
    return build_alert(name, status, labels, annotations, starts_at, ends_at, wire.fingerprint, wire.generatorURL,
                       f"alerts[{index}]")
