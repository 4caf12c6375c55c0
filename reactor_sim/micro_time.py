"""Decoding a MicroTime as kube-apiserver does: RFC 3339 with exactly six fractional digits, or a 400.

k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go `MicroTime.UnmarshalJSON` parses with
`time.Parse(RFC3339Micro, s)`, RFC3339Micro = "2006-01-02T15:04:05.000000Z07:00": Go's ".000000" takes exactly
a dot and six digits, so a time at a whole second written without its fraction ("…T10:00:00Z",
"…T10:00:00+00:00": Python's isoformat) or with three digits fails to decode. The request handler turns that
into 400 BadRequest (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go transformDecodeError):
`Lease in version "v1" cannot be handled as a Lease: parsing time "…" as "2006-01-02T15:04:05.000000Z07:00":
cannot parse "Z" as ".000000"`. Only the MicroTime fields are checked here: Lease's spec.acquireTime and
spec.renewTime (k8s.io/api/coordination/v1 LeaseSpec), and events.k8s.io Event's eventTime.
"""

from __future__ import annotations

import re
from typing import Any

LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
# (apiVersion group, kind) -> the paths of its MicroTime fields
MICRO_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("coordination.k8s.io", "Lease"): (("spec", "acquireTime"), ("spec", "renewTime")),
    ("events.k8s.io", "Event"): (("eventTime",),),
}
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_ZONE = re.compile(r"Z|[+-]\d{2}:\d{2}")


def parse_error(value: str) -> str | None:
    """Go's `time.Parse(RFC3339Micro, value)` error text, or None when it parses.

    The date and clock are checked as a whole (Go names the first element that fails; here the message
    names the layout's date-time part), then the fraction (a dot, or a comma as Go also takes, and exactly
    six digits) and the zone element by element as Go does.
    """
    head = f"parsing time {_quote(value)} as {_quote(LAYOUT)}: cannot parse "
    date_time = _DATE_TIME.match(value)
    if date_time is None:
        return head + f"{_quote(value)} as {_quote('2006-01-02T15:04:05')}"
    rest = value[date_time.end():]
    if len(rest) < 7 or rest[0] not in ".," or not rest[1:7].isdigit():
        return head + f"{_quote(rest)} as {_quote('.000000')}"
    zone = rest[7:]
    if not _ZONE.fullmatch(zone):
        return head + f"{_quote(zone)} as {_quote('Z07:00')}"
    return None


def decode_error(group: str, kind: str, obj: Any) -> str | None:
    """The first MicroTime field of `obj` that kube-apiserver could not decode, as its error text."""
    for path in MICRO_FIELDS.get((group, kind), ()):
        node: Any = obj
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue  # null/absent: the zero MicroTime
        if not isinstance(node, str):
            return f"json: cannot unmarshal {_json_type(node)} into Go value of type string"
        error = parse_error(node)
        if error is not None:
            return error
    return None


def _quote(text: str) -> str:
    """Go's strconv.Quote for the printable ASCII this sees."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"
