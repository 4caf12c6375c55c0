"""Which alerts fire now, asked of Alertmanager's API v2: the rebalancer's proof that a donor is idle.

The reactor keeps no store of alerts: `GET /api/v2/alerts` answers from Alertmanager's own view, the one its
silences and inhibit rules already shape. Upstream (prometheus/alertmanager, api/v2/openapi.yaml `getAlerts`;
api/v2/api.go `getAlertsHandler` and `alertFilter`): `active`, `silenced`, `inhibited`, `unprocessed` are
booleans that *include* a kind when true, so `active=true&silenced=false&inhibited=false` keeps the alerts that
would notify now (`unprocessed` is declared but not read by the handler: v0.25.0, v0.27.0, v0.30.0 and v0.34.0
checked; sent as the spec allows, for a server that does read it); `filter` is repeated, one matcher each, ANDed
(`parseFilter`: pkg/labels/parse.go `ParseMatcher` before v0.27, matcher/compat `Matcher` after).

Which namespace: the webhook's parser (intake/alerts.py `parse_alert`) names an alert's workload by
`exported_namespace`, else `namespace` (the exporter's own target labels win the plain names when Prometheus does
not honor the exporter's). Alertmanager's matchers are ANDed, never ORed, so one request cannot ask for "either
label is X": the source asks twice, `namespace="X"` and `exported_namespace="X"`, each with `alertname=~"A|B"`,
merges by fingerprint and keeps what the webhook's parser places in X. Two narrow answers scale with the
namespace; one cluster-wide answer per alert name would scale with the cluster and meet the size caps first.
The server's filtering is an optimisation only: every answer is filtered again here, by state, name and namespace.

Every failure (refused connection, timeout, non-2xx, not JSON, not API v2's shape, over the caps) raises
`AlertSourceUnavailable` with one line naming the URL (without credentials); the caller then moves nothing. One
entry of an answer that does not parse as an alert is left out and counted (`reactor_alert_source_entries_skipped`):
anyone can POST an alert into Alertmanager, and one bad one must not hide a namespace's others.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from reactor.config.settings import AlertSource, Settings
from reactor.core.errors import AlertSourceUnavailable, InvalidPayload, ReactorError
from reactor.core.model import Alert, Status
from reactor.intake.alerts import parse_alert
from reactor.sources.http import Credentials, Failed, Target, Tls, Watchdog, one_line, read_body
from reactor.sources.metrics import SourceMetrics

if TYPE_CHECKING:
    from reactor.core.metrics import Metrics

log = logging.getLogger(__name__)
ALERTS_PATH = "/api/v2/alerts"
STATUS_PATH = "/api/v2/status"
MAX_BODY_BYTES = 8 * 1024 * 1024  # a gettableAlert is ~1 KiB: thousands of alerts for one namespace is not idle data
MAX_ALERTS = 5_000
NAMESPACE_LABELS = ("namespace", "exported_namespace")  # both spellings intake/alerts.py reads
# Go's regexp.QuoteMeta (regexp/regexp.go, `special`): the characters RE2 reads as syntax.
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")
_T = TypeVar("_T")



def quote_value(value: str) -> str:
    """A matcher's double-quoted value, readable by both of Alertmanager's parsers: the classic one unescapes
    `\\\\`, `\\"` and `\\n` (pkg/labels/parse.go `ParseMatcher`), the UTF-8 one runs Go's strconv.Unquote
    (matcher/parse/token.go `unquote`), which reads the same three escapes and refuses a raw newline."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def quote_meta(text: str) -> str:
    """`text` as a literal inside an RE2 regular expression (Go's regexp.QuoteMeta)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


def matchers(label: str, namespace: str, alertnames: Collection[str]) -> list[str]:
    """The `filter` values of one request: the namespace label equal, the alert name one of (anchored by
    Alertmanager: labels.NewMatcher compiles `^(?:...)$`)."""
    names = "|".join(quote_meta(n) for n in sorted(set(alertnames)))
    return [f"{label}={quote_value(namespace)}", f"alertname=~{quote_value(names)}"]


def alerts_query(label: str, namespace: str, alertnames: Collection[str]) -> str:
    params = [("active", "true"), ("silenced", "false"), ("inhibited", "false"), ("unprocessed", "false")]
    params += [("filter", m) for m in matchers(label, namespace, alertnames)]
    return f"{ALERTS_PATH}?{urllib.parse.urlencode(params)}"


class AlertmanagerAlerts:
    """`FiringAlerts` over Alertmanager's API v2. Thread-safe: each call opens its own connection.

    `timeout` bounds a whole call (both requests, connect to last byte): a watchdog shuts the socket at the
    deadline, so a server that trickles bytes cannot hold a caller past it.
    """

    def __init__(self, source: AlertSource, *, metrics: Metrics | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES, max_alerts: int = MAX_ALERTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if source.url is None:
            raise ReactorError("rebalance.alertmanagerUrl is not set")
        self._target = Target.of(source.url, "rebalance.alertmanagerUrl")
        self._source = source
        self._timeout = source.timeout.total_seconds()
        self._metrics = metrics
        self._counts = SourceMetrics.of(metrics) if metrics is not None else None  # sources/metrics.py
        self._max_body = max_body_bytes
        self._max_alerts = max_alerts
        self._clock = clock
        self._credentials = Credentials(source.token_file, self._target.basic)
        self._tls = Tls(source.ca_file)

    @property
    def url(self) -> str:
        """The configured URL without credentials: what every reason names."""
        return self._target.shown

    def firing(self, namespace: str, alertnames: Collection[str]) -> Sequence[Alert]:
        """The alerts that notify now in `namespace` (as the webhook's parser places them) with one of
        `alertnames`, oldest first; `AlertSourceUnavailable` when Alertmanager cannot say."""
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"expected a namespace name, got {namespace!r}")
        names = frozenset(alertnames)
        if not names:
            return ()
        deadline = self._clock() + self._timeout
        found: dict[str, Alert] = {}
        for label in NAMESPACE_LABELS:
            path = alerts_query(label, namespace, names)
            for alert in self._get_json(path, deadline, self._alerts):
                if alert.name in names and alert.namespace == namespace:
                    found.setdefault(alert.fingerprint, alert)
        return tuple(sorted(found.values(), key=lambda a: (a.starts_at, a.fingerprint)))

    def status(self) -> Mapping[str, Any]:
        """`GET /api/v2/status` (the doctor's check: reachable with this auth; its version and cluster)."""
        return self._get_json(STATUS_PATH, self._clock() + self._timeout, _status)

    # --- one answer into alerts ---

    def _alerts(self, body: Any) -> list[Alert]:
        """gettableAlerts (api/v2/openapi.yaml) into `Alert`s with status FIRING; entries whose `status.state` is
        not "active" (suppressed, unprocessed) are left out even if the server sent them."""
        if not isinstance(body, list):
            raise Failed("invalid", "expected a JSON list of alerts (gettableAlerts)")
        if len(body) > self._max_alerts:
            raise Failed("invalid", f"{len(body)} alerts, more than the {self._max_alerts} this source reads in "
                          "one answer")
        alerts = []
        for i, raw in enumerate(body):
            state = raw.get("status") if isinstance(raw, dict) else None
            if not isinstance(state, dict) or not isinstance(state.get("state"), str):
                self._left_out(f"alerts[{i}]: expected a gettableAlert with status.state")
                continue
            if state["state"] != "active":
                continue
            # The webhook's shape for the same alert: its parser, unchanged, names the workload and reads
            # the annotations (value, gpus, ...) exactly as a notification's.
            fields = {k: raw[k] for k in ("labels", "annotations", "startsAt", "endsAt", "fingerprint",
                                          "generatorURL") if k in raw}
            try:
                alerts.append(parse_alert({**fields, "status": Status.FIRING.value}, f"alerts[{i}]"))
            except InvalidPayload as e:
                # One malformed entry (anyone can POST an alert into Alertmanager) must not make the source
                # unavailable for the whole namespace: it is left out, counted and logged; the others are read.
                self._left_out(str(e))
        return alerts

    def _left_out(self, why: str) -> None:
        if self._counts is not None:
            self._counts.entries_skipped.inc()
        log.warning("an alert Alertmanager holds was left out: it does not parse", extra={"detail": why[:300]})

    # --- HTTP ---

    def _get_json(self, path: str, deadline: float, read: Callable[[Any], _T]) -> _T:
        """One request; `read` turns the decoded JSON into the answer or raises `Failed` (counted as invalid)."""
        started = self._clock()
        result = "ok"
        try:
            raw = self._get(path, deadline)
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise Failed("invalid", f"not JSON ({one_line(e)})") from None
            return read(body)
        except Failed as e:
            result = e.result
            raise self._unavailable(path, e.why) from None
        finally:
            if self._metrics is not None and self._counts is not None:
                self._metrics.child(self._counts.alert_source_requests, result).inc()
                self._counts.alert_source_duration.observe(max(0.0, self._clock() - started))

    def _get(self, path: str, deadline: float) -> bytes:
        headers = {"Accept": "application/json", "User-Agent": "gpu-reactor"}
        auth = self._credentials.header()
        if auth is not None:
            headers["Authorization"] = auth
        left = deadline - self._clock()
        if left <= 0:
            raise Failed("timeout", f"no time left of the {self._timeout:g}s timeout")
        t = self._target
        conn: http.client.HTTPConnection
        if t.https:
            conn = http.client.HTTPSConnection(t.host, t.port, timeout=left, context=self._tls.context()[0])
        else:
            conn = http.client.HTTPConnection(t.host, t.port, timeout=left)
        watchdog = Watchdog(deadline, self._clock, self._timeout)
        response: http.client.HTTPResponse | None = None
        try:
            conn.connect()  # the socket's timeout (what is left) bounds the connect and the TLS handshake
            watchdog.arm(conn.sock)
            conn.request("GET", t.prefix + path, headers=headers)
            response = conn.getresponse()
            if not 200 <= response.status < 300:
                detail = response.read(200).decode("utf-8", "replace")
                raise Failed("refused", f"HTTP {response.status} {response.reason}"
                              + (f": {one_line(detail)}" if detail.strip() else ""))
            body = read_body(response, self._max_body)
            if watchdog.expired:  # the watchdog ended the stream: what came is a part, not the answer
                raise watchdog.cut_short()
            return body
        except Failed as e:
            if watchdog.expired and e.result != "invalid":  # cut short by the watchdog, not by the server
                raise watchdog.cut_short() from None
            raise
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise watchdog.failure(e) from None
        finally:
            watchdog.disarm()
            if response is not None:
                response.close()
            conn.close()

    def _unavailable(self, path: str, why: str) -> AlertSourceUnavailable:
        return AlertSourceUnavailable(f"Alertmanager {self.url}{path.split('?', 1)[0]}: {why}")


def _status(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("versionInfo"), dict) \
            or not isinstance(body.get("cluster"), dict):
        raise Failed("invalid", "not an alertmanagerStatus object (versionInfo, cluster)")
    return body


def firing_source(settings: Settings, metrics: Metrics | None = None) -> AlertmanagerAlerts | None:
    """The rebalancer's alert source; None when rebalancing is off or no Alertmanager URL is set."""
    if not settings.policy.rebalance_enabled or settings.alertmanager.url is None:
        return None
    return AlertmanagerAlerts(settings.alertmanager, metrics=metrics)
