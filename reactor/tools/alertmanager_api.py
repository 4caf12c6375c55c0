"""A small stand-in for Alertmanager's API v2, for `reactor demo`: it answers what the reactor's alert source
(sources/alertmanager.py `AlertmanagerAlerts`) asks, from the alerts the demo says are firing now.

The demo has no Prometheus and no Alertmanager; its notifications are already shaped as Alertmanager sends them
(tools/payloads.py). This plays the other half the same way: `GET /api/v2/alerts` and `GET /api/v2/status` over
real HTTP, each answer in the shape Alertmanager 0.25 returns (prometheus/alertmanager v0.25.0):

- `GET /api/v2/alerts` (api/v2/openapi.yaml `getAlerts`; api/v2/api.go `getAlertsHandler`): the booleans
  `active`, `silenced`, `inhibited` include a kind when true (`alertFilter`; `unprocessed` is declared but not read
  there, so it is only checked for being a boolean); `filter` is repeated, one matcher each, ANDed
  (`parseFilter` → pkg/labels/parse.go `ParseMatcher`, `matchFilterLabels`); `receiver` is a regular expression
  anchored as `^(?:...)$`. An alert whose `endsAt` has passed is left out. The answer is a list of gettableAlert
  (api/v2/compat.go `AlertToOpenAPIAlert`): labels, annotations, startsAt, updatedAt, endsAt, fingerprint,
  receivers [{name}], status {state, silencedBy, inhibitedBy}, generatorURL — sorted by fingerprint. A filter
  that does not parse is HTTP 400 with the parser's message, as upstream.
- `GET /api/v2/status` (openapi.yaml `alertmanagerStatus`): cluster, versionInfo, config, uptime — what
  `reactor doctor` reads.

What it does not play: silences and inhibitions (every alert it holds is `active`, silencedBy and inhibitedBy
empty), routing (each alert's receivers are the one the demo names), POST, and Go's RE2 (regular expressions run
on Python's `re`, the same for the plain alternations the reactor sends). It never stands in for Alertmanager
outside the demo and its tests.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

from reactor.tools.loopback import LoopbackServer
from reactor.tools.matchers import Matcher, MatcherError, parse_matcher
from reactor.tools.payloads import AlertSpec, alert_body, rfc3339

VERSION = "0.25.0"
RECEIVER = "gpu-reactor"  # the receiver the demo's notifications name (payloads.notification's default)
# prometheus rules/alerting.go `sendAlerts`: an alert sent while firing is valid until 4 × max(resend delay (1m),
# evaluation interval) from then; that is its endsAt in Alertmanager until Prometheus sends it again.
VALID_FOR = timedelta(minutes=4)
# go-openapi swag.ConvertBool: the spellings of a boolean query parameter.
_TRUE = {"true", "1", "yes", "ok", "y", "on", "selected", "checked", "t", "enabled"}
_FALSE = {"false", "0", "no", "n", "off", "f", "disabled", ""}


class BadRequest(ValueError):
    """A query Alertmanager answers with 400; the message is its own."""


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """api/v2/api.go `matchFilterLabels`: an empty `!=`/`!~` value passes a present label; an empty `=`/`=~` value
    passes an absent one; otherwise the matcher decides on the label's value ("" when absent)."""
    for m in matchers:
        present = m.name in labels
        value = labels.get(m.name, "")
        if m.value == "" and ((m.op in ("!=", "!~") and present) or (m.op in ("=", "=~") and not present)):
            continue
        if not m.matches(value):
            return False
    return True


def gettable(spec: AlertSpec, received: datetime, receiver: str = RECEIVER) -> dict[str, Any]:
    """The gettableAlert Alertmanager 0.25 returns for the alert of `spec` that Prometheus last sent at `received`:
    api/v2/compat.go `AlertToOpenAPIAlert` (strfmt.DateTime: milliseconds, UTC); labels, annotations, startsAt,
    generatorURL and fingerprint exactly as the webhook carries them (payloads.alert_body)."""
    body = alert_body(spec, received)
    return {
        "annotations": body["annotations"],
        "endsAt": rfc3339(received + VALID_FOR),
        "fingerprint": body["fingerprint"],
        "receivers": [{"name": receiver}],
        "startsAt": body["startsAt"],
        "status": {"inhibitedBy": [], "silencedBy": [], "state": "active"},
        "updatedAt": rfc3339(received),
        "generatorURL": body["generatorURL"],
        "labels": body["labels"],
    }


def _boolean(query: Mapping[str, list[str]], name: str) -> bool:
    """A boolean query parameter, true by default (openapi.yaml `getAlerts`), spelled as go-openapi reads it."""
    values = query.get(name)
    if not values:
        return True
    text = values[-1].strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadRequest(f"{name} in query must be of type boolean: \"{values[-1]}\"")


class AlertmanagerStandIn(LoopbackServer):
    """The loopback server and the alerts it holds; `fire` replaces them (what Prometheus sends now)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host, thread_name="demo-alertmanager")
        self.started = datetime.now(UTC)
        self._alerts: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def fire(self, specs: Iterable[AlertSpec], now: datetime | None = None) -> None:
        """The alerts firing now (Prometheus's latest send); an alert left out has resolved."""
        received = now or datetime.now(UTC)
        alerts = [gettable(spec, received) for spec in specs]
        with self._lock:
            self._alerts = alerts

    def alerts(self, query: Mapping[str, list[str]], now: datetime | None = None) -> list[dict[str, Any]]:
        """The answer to `GET /api/v2/alerts?<query>`; `BadRequest` where Alertmanager answers 400."""
        try:
            matchers = [parse_matcher(f) for f in query.get("filter", [])]
        except MatcherError as e:
            raise BadRequest(str(e)) from None
        active = _boolean(query, "active")
        for name in ("silenced", "inhibited", "unprocessed"):  # nothing held is silenced, inhibited or unprocessed
            _boolean(query, name)
        receiver = None
        if query.get("receiver"):
            try:
                receiver = re.compile(f"^(?:{query['receiver'][-1]})$")
            except re.error as e:
                raise BadRequest(f"failed to parse receiver param: {e}") from None
        moment = rfc3339(now or datetime.now(UTC))
        with self._lock:
            held = list(self._alerts)
        found = [a for a in held
                 if a["endsAt"] >= moment and active and matches_all(matchers, a["labels"])
                 and (receiver is None or any(receiver.match(r["name"]) for r in a["receivers"]))]
        return sorted(found, key=lambda a: a["fingerprint"])

    def status(self) -> dict[str, Any]:
        """openapi.yaml `alertmanagerStatus` for a single instance (no cluster)."""
        return {"cluster": {"peers": [], "status": "disabled"},
                "config": {"original": f"route:\n  receiver: {RECEIVER}\nreceivers:\n- name: {RECEIVER}\n"},
                "uptime": rfc3339(self.started),
                "versionInfo": {"branch": "HEAD", "buildDate": "", "buildUser": "", "goVersion": "",
                                "revision": "", "version": VERSION}}

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        try:
            if parts.path == "/api/v2/alerts":
                self._send_json(handler, 200, self.alerts(query))
            elif parts.path == "/api/v2/status":
                self._send_json(handler, 200, self.status())
            else:
                self._send_json(handler, 404, {"code": 404, "message": f"path {parts.path} was not found"})
        except BadRequest as e:
            self._send_json(handler, 400, str(e))

    def _send_json(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        self.send(handler, status, json.dumps(body).encode(), "application/json")
