"""What Prometheus measures and what its rules fire, asked of its HTTP API v1: the reactor's measurement.

An alert delivered by Alertmanager is a claim (anyone who reaches Alertmanager's API can post one); Prometheus's
own rule state and its query engine are what the rules actually produced. This client reads them:

- `query` (GET /api/v1/query) and `query_range` (GET /api/v1/query_range): instant vectors and matrices;
- `rules` (GET /api/v1/rules?type=alert): each rule group's evaluation interval, each alerting rule's `for`
  and its active alerts (labels, state, activeAt, the expression's value) — what rule evaluation produced,
  never a scraped series that merely carries the name;
- `alerts` (GET /api/v1/alerts): the active alerts alone; `buildinfo` (GET /api/v1/status/buildinfo).

Shapes as upstream writes them (prometheus/prometheus v2.42.0, web/api/v1/api.go: `queryData`, `AlertDiscovery`,
`RuleDiscovery`, `RuleGroup`, `AlertingRule`, `Alert`; an alert's `value` is strconv.FormatFloat(v, 'e', -1, 64),
a sample's value the same number as a string beside its unix time in seconds).

Discipline (as sources/alertmanager.py): one deadline bounds each call from connect to last byte (a watchdog
shuts the socket, so a server trickling bytes cannot hold a caller past it); the body is capped; redirects are
not followed; a bearer token file is re-read when it changes; an https URL is verified against `ca_file`; the
URL is never printed with its credentials. Unlike that source, connections are kept alive and reused: the
confirm step asks on every notification. Every failure raises `PrometheusUnavailable(reason)`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from reactor.core.errors import InvalidPayload, PrometheusUnavailable
from reactor.sources.http import Credentials, Failed, Target, Tls, Watchdog, one_line, read_body
from reactor.sources.prometheus_answers import (
    RuleGroup,
    Sample,
    Series,
    read_buildinfo,
    read_matrix,
    read_rule_groups,
    read_vector,
    unix,
)

QUERY_PATH = "/api/v1/query"
QUERY_RANGE_PATH = "/api/v1/query_range"
RULES_PATH = "/api/v1/rules"
BUILDINFO_PATH = "/api/v1/status/buildinfo"
MAX_BODY_BYTES = 16 * 1024 * 1024  # an active alert is ~1 KiB in /api/v1/rules: thousands fit
MAX_IDLE_CONNECTIONS = 4  # kept alive between calls; more concurrent callers open their own and close them
_T = TypeVar("_T")
# The failures of a kept-alive connection that the server closed while it sat idle: met before any answer,
# so the request was not processed and is sent once more on a new connection.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class PrometheusApi:
    """A client of one Prometheus's HTTP API v1. Thread-safe; idle connections are kept and reused.

    `timeout` bounds each call. `observe(result, seconds)`, when given, is told each request's result ("ok",
    "timeout", "unreachable", "refused", "invalid") and duration: the caller's metrics, declared where it counts.
    `key` names the setting in a URL error (`confirm.prometheusUrl`).
    """

    def __init__(self, url: str, *, token_file: str | None = None, ca_file: str | None = None,
                 timeout: timedelta | float = 5.0, max_body_bytes: int = MAX_BODY_BYTES,
                 observe: Callable[[str, float], None] | None = None, key: str = "prometheusUrl",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._target = Target.of(url, key)
        self._timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        if not self._timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._max_body = max_body_bytes
        self._observe = observe
        self._clock = clock
        self._credentials = Credentials(token_file, self._target.basic)
        self._tls = Tls(ca_file)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The configured URL without credentials: what every reason names."""
        return self._target.shown

    @property
    def timeout(self) -> float:
        return self._timeout

    def close(self) -> None:
        """Close the idle connections (a call in flight closes its own when done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- the API ---

    def query(self, expr: str, at: datetime | None = None) -> tuple[Sample, ...]:
        """An instant query's vector (`at`: the evaluation time, else the server's now)."""
        params = [("query", expr)] + ([("time", unix(at))] if at is not None else [])
        return self._call(QUERY_PATH, params, read_vector)

    def query_range(self, expr: str, start: datetime, end: datetime, step: timedelta) -> tuple[Series, ...]:
        """A range query's matrix, from `start` to `end` every `step`."""
        return self.query_range_read(expr, start, end, step, read_matrix)

    def query_range_read(self, expr: str, start: datetime, end: datetime, step: timedelta,
                         read: Callable[[Any], _T]) -> _T:
        """A range query's `data`, read by `read` (`reactor report` reads a week of samples into arrays of floats,
        not datetimes); what `read` raises (ValueError, TypeError, KeyError) is an invalid answer."""
        if step.total_seconds() <= 0:
            raise ValueError(f"step must be positive, got {step}")
        params = [("query", expr), ("start", unix(start)), ("end", unix(end)),
                  ("step", f"{step.total_seconds():g}")]
        return self._call(QUERY_RANGE_PATH, params, read)

    def rules(self, names: Collection[str] = ()) -> tuple[RuleGroup, ...]:
        """The alerting rules' groups, with each rule's active alerts. `names`: the alert names wanted, sent as
        `rule_name[]` (a server that knows the filter, 2.46+, answers less; 2.42 ignores it) and applied here too,
        so the answer is the same either way."""
        params = [("type", "alert")] + [("rule_name[]", n) for n in sorted(set(names))]
        groups = self._call(RULES_PATH, params, read_rule_groups)
        if not names:
            return groups
        wanted = frozenset(names)
        return tuple(RuleGroup(g.name, g.file, g.interval, tuple(r for r in g.rules if r.name in wanted),
                               g.last_evaluation) for g in groups)

    def buildinfo(self) -> Mapping[str, str]:
        """GET /api/v1/status/buildinfo: `version`, `revision`, ... (the doctor's check of who answers)."""
        return self._call(BUILDINFO_PATH, [], read_buildinfo)

    # --- one request ---

    def _call(self, path: str, params: list[tuple[str, str]], read: Callable[[Any], _T]) -> _T:
        started = self._clock()
        result = "ok"
        try:
            body = self._get(path + ("?" + urllib.parse.urlencode(params) if params else ""), started + self._timeout)
            try:
                doc = json.loads(body)
            except ValueError as e:
                raise Failed("invalid", f"not JSON ({one_line(e)})") from None
            if not isinstance(doc, dict) or doc.get("status") != "success" or "data" not in doc:
                raise Failed("invalid", "not an API v1 answer (status \"success\" and data)")
            try:
                return read(doc["data"])
            except (InvalidPayload, KeyError, TypeError, ValueError, AttributeError) as e:
                raise Failed("invalid", f"unexpected answer: {one_line(e)}") from None
        except Failed as e:
            result = e.result
            raise PrometheusUnavailable(f"Prometheus {self.url}{path}: {e.why}") from None
        finally:
            if self._observe is not None:
                self._observe(result, max(0.0, self._clock() - started))

    def _get(self, path_query: str, deadline: float) -> bytes:
        headers = {"Accept": "application/json", "User-Agent": "gpu-reactor", "Connection": "keep-alive"}
        auth = self._credentials.header()
        if auth is not None:
            headers["Authorization"] = auth
        try:
            return self._exchange(self._connection(deadline), self._target.prefix + path_query, headers, deadline)
        except _Stale:
            # The server closed the idle connection before this request reached it: nothing was processed.
            return self._exchange(self._connection(deadline, fresh=True), self._target.prefix + path_query, headers,
                                  deadline)

    def _connection(self, deadline: float, *, fresh: bool = False) -> http.client.HTTPConnection:
        left = deadline - self._clock()
        if left <= 0:
            raise Failed("timeout", f"no time left of the {self._timeout:g}s timeout")
        t = self._target
        context = None
        if t.https:
            context, rebuilt = self._tls.context()
            if rebuilt:  # a rotated CA: the kept connections were verified against the old one
                with self._lock:
                    stale, self._idle = self._idle, []
                for old in stale:
                    old.close()
        if not fresh:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
        if context is not None:
            return http.client.HTTPSConnection(t.host, t.port, timeout=left, context=context)
        return http.client.HTTPConnection(t.host, t.port, timeout=left)

    def _exchange(self, conn: http.client.HTTPConnection, target: str, headers: dict[str, str],
                  deadline: float) -> bytes:
        """One request on `conn`; kept for reuse when the answer was read whole and the server keeps it open."""
        reused = conn.sock is not None
        watchdog = Watchdog(deadline, self._clock, self._timeout)
        response: http.client.HTTPResponse | None = None
        keep = False
        try:
            left = deadline - self._clock()
            if left <= 0:
                raise Failed("timeout", f"no time left of the {self._timeout:g}s timeout")
            if conn.sock is None:
                conn.timeout = left
                conn.connect()  # the socket's timeout (what is left) bounds the connect and the TLS handshake
            else:
                conn.sock.settimeout(left)
            watchdog.arm(conn.sock)
            try:
                conn.request("GET", target, headers=headers)
                response = conn.getresponse()
            except _STALE as e:
                if reused and not watchdog.expired:
                    raise _Stale() from e
                raise
            if not 200 <= response.status < 300:
                raise Failed("refused", f"HTTP {response.status} {response.reason}{_error_detail(response)}")
            body = read_body(response, self._max_body)
            if watchdog.expired:  # the watchdog ended the stream: what came is a part, not the answer
                raise watchdog.cut_short()
            keep = not response.will_close
            return body
        except (Failed, _Stale):
            if watchdog.expired:
                raise watchdog.cut_short() from None
            raise
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise watchdog.failure(e) from None
        finally:
            watchdog.disarm()
            if response is not None:
                response.close()
            if keep and not watchdog.expired:
                self._keep(conn)
            else:
                conn.close()

    def _keep(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()


class _Stale(Exception):
    """A kept-alive connection the server had closed: send again on a new one."""


def _error_detail(response: http.client.HTTPResponse) -> str:
    """The `error` of an API v1 error answer ({"status":"error","errorType":...,"error":...}), else its start."""
    raw = response.read(2048).decode("utf-8", "replace")
    with contextlib.suppress(ValueError, AttributeError):
        doc = json.loads(raw)
        raw = f"{doc.get('errorType', '')}: {doc.get('error', '')}"
    return f": {one_line(raw)}" if raw.strip(" :") else ""
