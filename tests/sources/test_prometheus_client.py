"""The Prometheus API client (sources/prometheus.py) against a local HTTP stub: the shapes it reads, and every
failure ending in `PrometheusUnavailable` naming the URL without credentials, with nothing returned.

What a real Prometheus 2.42 answers is checked in tests/promstack/test_prometheus_client.py.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from reactor.core.errors import Failure, PrometheusUnavailable, ReactorError, classify
from reactor.intake.bearer import CHECK_SECONDS
from reactor.sources.prometheus import PrometheusApi
from tests.sources.stub_http import Handler, StubServer, trickle
from tests.sources.stub_http import send as _send


class Stub(StubServer):
    """The stub as Prometheus's HTTP API over HTTP/1.1 (keep-alive): an empty vector until a test says otherwise."""

    def __init__(self) -> None:
        super().__init__(lambda h: _send(h, 200, _ok({"resultType": "vector", "result": []})), keep_alive=True)
        self.apis: list[PrometheusApi] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, url: str, **kw: Any) -> PrometheusApi:
        """A client of this stub, its kept connections closed with the stub."""
        api = PrometheusApi(url, **kw)
        self.apis.append(api)
        return api

    def data(self, data: Any) -> None:
        self.handler = lambda h: _send(h, 200, _ok(data))

    def stop(self) -> None:
        for api in self.apis:
            api.close()
        super().stop()


def _ok(data: Any) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.stop()


def _unavailable(call: Callable[[], Any]) -> str:
    with pytest.raises(PrometheusUnavailable) as caught:
        call()
    assert "\n" not in caught.value.reason
    return caught.value.reason


# web/api/v1/api.go (v2.42.0) `RuleDiscovery`/`RuleGroup`/`AlertingRule`/`Alert`, as /api/v1/rules?type=alert writes
# them (durations in seconds, times RFC 3339 with nanoseconds, values strconv.FormatFloat(v, 'e', -1, 64)).
RULES = {"groups": [{
    "name": "gpu-reactor", "file": "/etc/prometheus/rules.yaml", "interval": 60, "limit": 0,
    "evaluationTime": 0.0012, "lastEvaluation": "2026-12-01T10:00:00.123456789Z",
    "rules": [{
        "state": "firing", "name": "GPUIdle", "query": "x < 0.02", "duration": 3600, "labels": {"severity": "info"},
        "annotations": {"value": "{{ $value }}"}, "health": "ok", "evaluationTime": 0.0003,
        "lastEvaluation": "2026-12-01T10:00:00.12Z", "type": "alerting",
        "alerts": [{"labels": {"alertname": "GPUIdle", "namespace": "team-a", "pod": "p-0", "container": "main"},
                    "annotations": {"value": "0.010"}, "state": "firing",
                    "activeAt": "2026-12-01T08:00:00.5+00:00", "value": "1e-02"}],
    }, {"name": "gpu_reactor:x", "query": "y", "health": "ok", "type": "recording", "labels": {}}],
}]}


def test_rules_reads_intervals_durations_and_active_alerts(stub: Stub) -> None:
    stub.data(RULES)
    api = stub.api(stub.url + "/prom/")
    (group,) = api.rules(["GPUIdle"])
    assert (group.name, group.interval) == ("gpu-reactor", timedelta(seconds=60))
    (rule,) = group.rules  # the recording rule is not an alerting rule
    assert (rule.name, rule.duration, rule.state, rule.health) == ("GPUIdle", timedelta(hours=1), "firing", "ok")
    (alert,) = rule.alerts
    assert alert.name == "GPUIdle" and alert.state == "firing" and alert.value == 0.01
    assert alert.active_at == datetime(2026, 12, 1, 8, 0, 0, 500000, tzinfo=UTC)
    path = urllib.parse.urlsplit(stub.requests[0][0])
    assert path.path == "/prom/api/v1/rules"  # the URL's path prefix kept
    assert urllib.parse.parse_qs(path.query) == {"type": ["alert"], "rule_name[]": ["GPUIdle"]}
    assert api.rules(["GPUSaturated"])[0].rules == ()  # the filter applies here too (2.42 ignores rule_name[])


def test_query_and_query_range_read_vectors_and_matrices(stub: Stub) -> None:
    stub.data({"resultType": "vector", "result": [
        {"metric": {"pod": "p-0"}, "value": [1764583200.5, "0.25"]},
        {"metric": {"pod": "p-1"}, "value": [1764583200.5, "NaN"]}]})
    api = stub.api(stub.url)
    at = datetime(2026, 12, 1, 10, tzinfo=UTC)
    first, second = api.query('up{job="x"}', at)
    assert first.labels == {"pod": "p-0"} and first.value == 0.25
    assert first.at == datetime.fromtimestamp(1764583200.5, UTC)
    assert second.value != second.value  # NaN kept: the caller decides what unknown means
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(stub.requests[0][0]).query)
    assert query == {"query": ['up{job="x"}'], "time": [f"{at.timestamp():.3f}"]}
    stub.data({"resultType": "matrix", "result": [{"metric": {"a": "b"}, "values": [[1, "1"], [2, "+Inf"]]}]})
    (series,) = api.query_range("x", at, at + timedelta(minutes=1), timedelta(seconds=15))
    assert [v for _, v in series.points] == [1.0, float("inf")]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(stub.requests[1][0]).query)
    assert query["step"] == ["15"]
    with pytest.raises(ValueError):
        api.query_range("x", at, at, timedelta(0))


def test_a_connection_is_kept_alive_and_reused(stub: Stub) -> None:
    api = stub.api(stub.url)
    for _ in range(5):
        api.query("x")
    assert len(stub.requests) == 5
    assert len(stub.connections) == 1


def test_the_server_closing_an_idle_connection_is_retried_once(stub: Stub) -> None:
    closes = {"n": 0}

    def close_after(h: BaseHTTPRequestHandler) -> None:
        closes["n"] += 1  # counted before the answer: the client may read it and return before this thread runs on
        _send(h, 200, _ok({"resultType": "vector", "result": []}))
        h.close_connection = True  # keep-alive promised by HTTP/1.1, then the server drops it while idle

    stub.handler = close_after
    api = stub.api(stub.url)
    api.query("x")
    time.sleep(0.1)
    assert api.query("x") == ()
    assert closes["n"] == 2


@pytest.mark.parametrize(("handler", "expected"), [
    (lambda h: _send(h, 503, b'{"status":"error","errorType":"unavailable","error":"not ready"}'),
     "HTTP 503 Service Unavailable: unavailable: not ready"),
    (lambda h: _send(h, 400, b'{"status":"error","errorType":"bad_data","error":"parse error"}'),
     "HTTP 400 Bad Request: bad_data: parse error"),
    (lambda h: _send(h, 302, b""), "HTTP 302"),  # redirects are not followed
    (lambda h: _send(h, 200, b"<html>"), "not JSON"),
    (lambda h: _send(h, 200, b'{"status":"error"}'), "not an API v1 answer"),
    (lambda h: _send(h, 200, _ok({"resultType": "scalar", "result": [1, "1"]})), "expected an instant vector"),
    (lambda h: _send(h, 200, _ok({"resultType": "vector", "result": [{"metric": {"a": 1}, "value": [1, "1"]}]})),
     "unexpected answer"),
], ids=["503", "400", "redirect", "not-json", "error-status", "scalar", "bad-labels"])
def test_every_bad_answer_is_unavailable_naming_the_url(stub: Stub, handler: Handler, expected: str) -> None:
    stub.handler = handler
    reason = _unavailable(lambda: stub.api(stub.url).query("x"))
    assert reason.startswith(f"Prometheus {stub.url}/api/v1/query: ")
    assert expected in reason


def test_rules_answer_with_a_bad_state_is_unavailable(stub: Stub) -> None:
    bad = json.loads(json.dumps(RULES))
    bad["groups"][0]["rules"][0]["alerts"][0]["state"] = "maybe"
    stub.data(bad)
    assert "unexpected answer" in _unavailable(lambda: stub.api(stub.url).rules())


def test_a_trickling_server_is_cut_at_the_deadline(stub: Stub) -> None:
    stub.handler = trickle(100000, 100)
    started = time.monotonic()
    reason = _unavailable(lambda: stub.api(stub.url, timeout=0.4).query("x"))
    assert time.monotonic() - started < 1.5
    assert "timeout" in reason


def test_the_body_is_capped(stub: Stub) -> None:
    stub.data({"resultType": "vector", "result": [{"metric": {"x": "y" * 5000}, "value": [1, "1"]}]})
    assert "over the 1000-byte limit" in _unavailable(lambda: stub.api(stub.url, max_body_bytes=1000).query("x"))


def test_a_refused_connection_is_unreachable_and_counted() -> None:
    seen: list[tuple[str, float]] = []
    api = PrometheusApi("http://user:secret@127.0.0.1:9", observe=lambda r, s: seen.append((r, s)), timeout=1)
    reason = _unavailable(lambda: api.query("x"))
    assert "secret" not in reason and "user" not in reason and "127.0.0.1:9" in reason
    assert seen and seen[0][0] == "unreachable"


def test_bearer_token_file_is_sent_and_reread(stub: Stub, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    api = stub.api(stub.url, token_file=str(token))
    api.query("x")
    token.write_text("second-token\n")
    time.sleep(CHECK_SECONDS)  # the file is checked at most once per CHECK_SECONDS
    api.query("x")
    assert [h["Authorization"] for _, h in stub.requests] == ["Bearer first", "Bearer second-token"]
    token.write_text("")
    time.sleep(CHECK_SECONDS)
    assert "token file" in _unavailable(lambda: api.query("x"))


def test_basic_auth_from_the_url_is_sent_never_shown(stub: Stub) -> None:
    api = stub.api(stub.url.replace("http://", "http://ann:pw@"))
    api.query("x")
    assert stub.requests[0][1]["Authorization"] == "Basic YW5uOnB3"
    assert "pw" not in api.url


def test_a_bad_url_names_the_key_without_credentials() -> None:
    with pytest.raises(ReactorError, match="confirm.prometheusUrl") as caught:
        PrometheusApi("ftp://u:secret@host", key="confirm.prometheusUrl")
    assert "secret" not in str(caught.value)


def test_unavailable_is_a_temporary_failure_the_webhook_answers_503() -> None:
    assert classify(PrometheusUnavailable("x")) is Failure.RETRY
