"""A small stand-in for Prometheus's API v1, for `reactor demo` and the tests over the embedded cluster: it answers
what the confirm step (sources/confirm.py) asks, from the alerts the demo says the rules fire now.

The demo has no Prometheus; its notifications are shaped as Alertmanager sends them (tools/payloads.py), and this
plays the rule state behind them over real HTTP, each answer in the shape Prometheus 2.42 returns
(prometheus/prometheus v2.42.0, web/api/v1/api.go), checked field by field against the real one in
tests/promstack/test_prometheus_stand_in.py:

- `GET /api/v1/rules` (`rules`: `RuleDiscovery` → `RuleGroup` → `AlertingRule` → `Alert`): one group,
  `gpu-reactor`, with an alerting rule per alert the reactor understands; `type=alert` keeps alerting rules,
  `type=record` none (the stand-in has no recording rules); other parameters (`rule_name[]`, newer servers'
  filters) are ignored, as 2.42 ignores them. An alert's `value` is Go's strconv.FormatFloat(v, 'e', -1, 64);
  times are RFC 3339 with up to nine fraction digits (Go's time.RFC3339Nano).
- `GET /api/v1/alerts` (`alerts`: `AlertDiscovery`): every active alert.
- `GET /api/v1/status/buildinfo` and `GET /-/ready`: what `reactor doctor` reads.

What it does not play: PromQL (`/api/v1/query*` answer 400 `bad_data`), rule evaluation (an alert is as `fire`
says), recording rules, external labels. It never stands in for Prometheus outside the demo and its tests.

Its rule state changes whenever the demo or a test tells it, not on a schedule, so by default its group says what
Prometheus says of a group it has not evaluated yet: `lastEvaluation` Go's zero time, and the reactor, which reuses
an answer until the next evaluation (sources/confirm.py), asks every time. `evaluates=` plays a schedule instead
(`lastEvaluation` the latest tick since it started): the bench's, which tells it everything before the reactor asks.
"""

from __future__ import annotations

import json
import math
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler
from typing import Any

from reactor.core.model import KNOWN_ALERTS
from reactor.tools.loopback import LoopbackServer
from reactor.tools.payloads import AlertSpec, alert_body

VERSION = "2.42.0"
GROUP = "gpu-reactor"
RULES_FILE = "/etc/prometheus/rules/gpu-reactor.rules.yaml"
INTERVAL = timedelta(minutes=1)
_IDENTITY = ("namespace", "pod", "container")


def go_float(value: float) -> str:
    """strconv.FormatFloat(value, 'e', -1, 64): the shortest digits that read back, exponent of two digits at least
    ("1e-02", "3.4e-01", "1.25e+00"), and Go's NaN and infinities ("NaN", "+Inf", "-Inf")."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0e+00" if math.copysign(1, value) < 0 else "0e+00"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    power = exponent + len(text) - 1
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"


def go_time(moment: datetime) -> str:
    """Go's time.RFC3339Nano for a UTC time: the fraction's trailing zeros trimmed, `Z`."""
    moment = moment.astimezone(UTC)
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


@dataclass(frozen=True)
class Held:
    """One alert the stand-in's rules hold: its labels and annotations as the rule renders them, its state, since
    when it is active, and the expression's value."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    state: str
    active_at: datetime
    value: float

    def api(self) -> dict[str, Any]:
        """web/api/v1/api.go `Alert` (v2.42.0)."""
        return {"labels": dict(self.labels), "annotations": dict(self.annotations), "state": self.state,
                "activeAt": go_time(self.active_at), "value": go_float(self.value)}


def _key(labels: Mapping[str, str]) -> tuple[str, ...]:
    return (labels.get("alertname", ""), *(labels.get(f"exported_{n}") or labels.get(n, "") for n in _IDENTITY))


class PrometheusStandIn(LoopbackServer):
    """The loopback server and the alerts its rules hold. `fire`/`observe` add or replace alerts, `resolve` drops
    them; `available = False` makes every answer a 503 (Prometheus restarting)."""

    def __init__(self, host: str = "127.0.0.1", *, rules: Iterable[str] = sorted(KNOWN_ALERTS),
                 durations: Mapping[str, timedelta] | None = None, evaluates: timedelta | None = None) -> None:
        super().__init__(host, thread_name="prometheus-stand-in", keep_alive=True)
        self.started = datetime.now(UTC)
        self.evaluates = evaluates  # None: when told (a group "not evaluated yet"); else every `evaluates`
        self._rules = tuple(rules)
        self._durations = dict(durations or {})
        self.available = True
        self._held: dict[tuple[str, ...], Held] = {}
        self._lock = threading.Lock()

    # --- what the rules fire ---

    def hold(self, labels: Mapping[str, str], annotations: Mapping[str, str], value: float, *,
             state: str = "firing", active_at: datetime | None = None) -> None:
        """The rule of `labels["alertname"]` holds this alert now (replacing one of the same workload identity)."""
        held = Held(dict(labels), dict(annotations), state, active_at or datetime.now(UTC), value)
        with self._lock:
            self._held[_key(labels)] = held

    def fire(self, specs: Iterable[AlertSpec], *, state: str = "firing", active_at: datetime | None = None) -> None:
        """The rules fire the alerts of `specs` (labels and annotations as payloads.alert_body renders them), each
        valued by its spec's `value` (NaN when None)."""
        for spec in specs:
            body = alert_body(spec, datetime.now(UTC))
            self.hold(body["labels"], body["annotations"], math.nan if spec.value is None else spec.value,
                      state=state, active_at=active_at or spec.starts_at)

    def resolve(self, labels: Mapping[str, str]) -> None:
        with self._lock:
            self._held.pop(_key(labels), None)

    def forget(self, names: Iterable[str]) -> None:
        """The rules named stop firing every alert they held."""
        names = set(names)
        with self._lock:
            self._held = {k: h for k, h in self._held.items() if h.labels.get("alertname") not in names}

    def clear(self) -> None:
        with self._lock:
            self._held.clear()

    def observe(self, notification: Mapping[str, Any]) -> None:
        """Make the rule state agree with a notification the rules produced: its firing alerts are held (valued by
        their `value` annotation), its resolved ones dropped. The tests and the demo post genuine alerts; a forged
        one is posted without this."""
        for alert in notification.get("alerts") or ():
            if not isinstance(alert, dict) or not isinstance(alert.get("labels"), dict):
                continue
            labels, annotations = alert["labels"], alert.get("annotations") or {}
            if not all(isinstance(v, str) for v in (*labels.values(), *annotations.values())):
                continue
            if alert.get("status") == "resolved":
                self.resolve(labels)
                continue
            try:
                value = float(annotations.get("value", "nan"))
            except ValueError:
                value = math.nan
            self.hold(labels, annotations, value)

    # --- the API ---

    def rules(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        """`GET /api/v1/rules` (v2.42.0 `rules`): `type` "alert" or "record" filters, anything else is 400."""
        kind = (query.get("type") or [""])[-1].lower()
        if kind not in ("", "alert", "record"):
            raise BadData(f'not supported value "{kind}"')
        with self._lock:
            held = list(self._held.values())
        evaluated = self._last_evaluation(datetime.now(UTC))
        rules = [] if kind == "record" else [self._rule(name, [h for h in held if h.labels.get("alertname") == name],
                                                          evaluated) for name in self._rules]
        return {"groups": [{"name": GROUP, "file": RULES_FILE, "rules": rules,
                            "interval": (self.evaluates or INTERVAL).total_seconds(), "limit": 0,
                            "evaluationTime": 0.000512, "lastEvaluation": evaluated}]}

    def _last_evaluation(self, now: datetime) -> str:
        """Go's zero time (never evaluated on a schedule), or the latest tick of `evaluates` since the start."""
        if self.evaluates is None:
            return "0001-01-01T00:00:00Z"
        return go_time(self.started + self.evaluates * ((now - self.started) // self.evaluates))

    def _rule(self, name: str, held: list[Held], evaluated: str) -> dict[str, Any]:
        states = {h.state for h in held}
        state = "firing" if "firing" in states else "pending" if states else "inactive"
        return {"state": state, "name": name, "query": f"gpu_reactor_stand_in{{alertname={json.dumps(name)}}}",
                "duration": self._durations.get(name, timedelta(0)).total_seconds(), "keepFiringFor": 0,
                "labels": {"reactor": "gpu", "severity": "warning"}, "annotations": {"value": "{{ $value }}"},
                "alerts": [h.api() for h in held], "health": "ok", "evaluationTime": 0.000128,
                "lastEvaluation": evaluated, "type": "alerting"}

    def alerts(self) -> dict[str, Any]:
        with self._lock:
            return {"alerts": [h.api() for h in self._held.values()]}

    def buildinfo(self) -> dict[str, Any]:
        return {"version": VERSION, "revision": "stand-in", "branch": "HEAD", "buildUser": "", "buildDate": "",
                "goVersion": ""}

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        if not self.available:
            self.send(handler, 503, b"Service Unavailable", "text/plain; charset=utf-8")
            return
        try:
            if parts.path == "/api/v1/rules":
                self._ok(handler, self.rules(query))
            elif parts.path == "/api/v1/alerts":
                self._ok(handler, self.alerts())
            elif parts.path == "/api/v1/status/buildinfo":
                self._ok(handler, self.buildinfo())
            elif parts.path in ("/-/ready", "/-/healthy"):
                self.send(handler, 200, b"Prometheus Server is Ready.\n", "text/plain; charset=utf-8")
            elif parts.path in ("/api/v1/query", "/api/v1/query_range"):
                raise BadData("the stand-in evaluates no PromQL")
            else:
                self.send(handler, 404, b"404 page not found\n", "text/plain; charset=utf-8")
        except BadData as e:
            body = {"status": "error", "errorType": "bad_data", "error": str(e)}
            self.send(handler, 400, json.dumps(body).encode(), "application/json")

    def _ok(self, handler: BaseHTTPRequestHandler, data: Any) -> None:
        self.send(handler, 200, json.dumps({"status": "success", "data": data}).encode(), "application/json")


class BadData(ValueError):
    """A request Prometheus answers 400 `bad_data`; the message is its own."""
