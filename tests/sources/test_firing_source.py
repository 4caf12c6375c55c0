"""The rebalancer's alert source (sources/alertmanager.py) against a local HTTP stub, one failure mode at a time.

What a real Alertmanager answers is checked in tests/promstack/test_firing_source.py; here the stub plays a
broken, slow, locked or impostor server, and every case must end in `AlertSourceUnavailable` naming the URL
(never its credentials), counted by result, with nothing returned.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from reactor.config.settings import AlertSource, build_settings
from reactor.core.errors import AlertSourceUnavailable, ReactorError
from reactor.core.metrics import Metrics
from reactor.intake.bearer import CHECK_SECONDS
from reactor.sources.alertmanager import (
    AlertmanagerAlerts,
    alerts_query,
    firing_source,
    matchers,
    quote_meta,
    quote_value,
)
from reactor.sources.metrics import SourceMetrics
from reactor.tools.launcher import free_port
from reactor_sim.tls import Certificate
from tests.sources.stub_http import StubServer, trickle
from tests.sources.stub_http import send as _send


def gettable(name: str = "GPUIdle", pod: str = "p-0", namespace: str = "team-a", state: str = "active",
             **labels: str) -> dict[str, Any]:
    """A gettableAlert as api/v2/api.go `AlertToOpenAPIAlert` returns it (strfmt.DateTime: milliseconds, Z)."""
    return {
        "labels": {"alertname": name, "namespace": namespace, "pod": pod, "container": "main", **labels},
        "annotations": {"value": "0.05", "gpus": "2"},
        "startsAt": "2026-12-01T10:00:00.000Z", "endsAt": "2026-12-01T11:04:00.000Z",
        "updatedAt": "2026-12-01T11:00:00.000Z", "fingerprint": f"{abs(hash((name, pod, namespace))):016x}"[:16],
        "receivers": [{"name": "null"}], "generatorURL": "http://prometheus/graph",
        "status": {"state": state, "silencedBy": [], "inhibitedBy": []},
    }


class Stub(StubServer):
    """The stub as Alertmanager's API: answers `[]` until a test says otherwise."""

    def __init__(self, context: Any = None) -> None:
        super().__init__(lambda h: _send(h, 200, b"[]"), context=context)

    def json(self, body: Any) -> None:
        self.handler = lambda h: _send(h, 200, json.dumps(body).encode())


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.stop()


def _source(url: str, *, timeout: float = 2.0, token_file: str | None = None, ca_file: str | None = None,
            metrics: Metrics | None = None, **kw: Any) -> AlertmanagerAlerts:
    return AlertmanagerAlerts(AlertSource(url=url, token_file=token_file, ca_file=ca_file,
                                          timeout=timedelta(seconds=timeout)), metrics=metrics, **kw)


def _unavailable(source: AlertmanagerAlerts, namespace: str = "team-a") -> str:
    with pytest.raises(AlertSourceUnavailable) as caught:
        source.firing(namespace, ("GPUIdle", "GPUUnderutilized"))
    reason = caught.value.reason
    assert "\n" not in reason
    return reason


def _count(metrics: Metrics, result: str) -> float:
    return metrics.registry.get_sample_value("reactor_alert_source_requests_total", {"result": result}) or 0.0


# --- the question ---

def test_the_query_asks_for_active_unsilenced_uninhibited_alerts_by_namespace_spelling_and_name(stub: Stub) -> None:
    stub.json([])
    assert _source(f"http://127.0.0.1:{stub.port}/am/").firing("team-a", ["GPUUnderutilized", "GPUIdle"]) == ()
    assert len(stub.requests) == 2
    for (path, _), label in zip(stub.requests, ("namespace", "exported_namespace"), strict=True):
        url = urllib.parse.urlsplit(path)
        assert url.path == "/am/api/v2/alerts"  # a route prefix in the URL is kept
        query = urllib.parse.parse_qs(url.query)
        assert {k: v for k, v in query.items() if k != "filter"} == {
            "active": ["true"], "silenced": ["false"], "inhibited": ["false"], "unprocessed": ["false"]}
        assert query["filter"] == [f'{label}="team-a"', 'alertname=~"GPUIdle|GPUUnderutilized"']


def test_matcher_values_are_escaped_for_both_of_alertmanagers_parsers() -> None:
    assert quote_value('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert quote_meta("GPU.Idle|x(y)[z]{1}^$*+?\\") == "GPU\\.Idle\\|x\\(y\\)\\[z\\]\\{1\\}\\^\\$\\*\\+\\?\\\\"
    assert matchers("namespace", "n", ["B.x", "A"]) == ['namespace="n"', 'alertname=~"A|B\\\\.x"']
    assert "filter=alertname%3D~%22A%22" in alerts_query("namespace", "n", ["A"])


def test_alerts_are_parsed_as_the_webhook_parses_them_and_filtered_again_here(stub: Stub) -> None:
    stub.json([
        gettable("GPUIdle", "p-0", namespace="gpu-operator", exported_namespace="team-a", exported_pod="w-0",
                 exported_container="trainer"),
        gettable("GPUIdle", "p-1", state="suppressed"),  # a server that ignored silenced=false: still left out
        gettable("GPUIdle", "p-2", state="unprocessed"),
        gettable("GPUSaturated", "p-3"),  # a server that ignored the filter: the name is checked here too
        gettable("GPUIdle", "p-4", namespace="team-b"),
        gettable("GPUIdle", "p-5", namespace="team-a", exported_namespace="team-b"),  # the workload is team-b's
    ])
    alerts = _source(f"http://127.0.0.1:{stub.port}").firing("team-a", ["GPUIdle"])
    assert [(a.name, a.namespace, a.pod, a.container, a.value, a.gpus, a.status.value) for a in alerts] == [
        ("GPUIdle", "team-a", "w-0", "trainer", 0.05, 2, "firing")]  # once, though both answers held it


# --- failures ---

def test_a_refused_connection_is_unreachable_naming_the_url_without_credentials() -> None:
    metrics = Metrics()
    port = free_port()
    reason = _unavailable(_source(f"http://user:secret@127.0.0.1:{port}/prefix", metrics=metrics))
    assert reason.startswith(f"Alertmanager http://127.0.0.1:{port}/prefix/api/v2/alerts: ")
    assert "secret" not in reason and "user" not in reason
    assert "refused" in reason.lower()
    assert _count(metrics, "unreachable") == 1


def test_a_slow_answer_past_the_timeout_is_a_timeout(stub: Stub) -> None:
    stub.handler = lambda h: (time.sleep(2), _send(h, 200, b"[]"))  # type: ignore[func-returns-value]
    metrics = Metrics()
    started = time.monotonic()
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", timeout=0.3, metrics=metrics))
    assert time.monotonic() - started < 1.5
    assert "timeout" in reason and _count(metrics, "timeout") == 1


def test_a_trickled_answer_cannot_outlast_the_timeout_of_the_whole_call(stub: Stub) -> None:
    """Each byte arrives well within the timeout; the whole answer does not: the deadline bounds the call."""
    stub.handler = trickle(1000, 1000)
    started = time.monotonic()
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", timeout=0.5))
    assert time.monotonic() - started < 1.5
    assert "timeout" in reason


@pytest.mark.parametrize("status", [401, 403, 500, 302])
def test_a_non_2xx_answer_is_refused(stub: Stub, status: int) -> None:
    stub.handler = lambda h: _send(h, status, b"Unauthorized\n", "text/plain")
    metrics = Metrics()
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", metrics=metrics))
    assert f"HTTP {status}" in reason and _count(metrics, "refused") == 1
    assert len(stub.requests) == 1  # the first failure ends the call; a redirect is not followed


def test_an_html_page_is_invalid(stub: Stub) -> None:
    stub.handler = lambda h: _send(h, 200, b"<html><body>Sign in</body></html>", "text/html")
    metrics = Metrics()
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", metrics=metrics))
    assert "not JSON" in reason and _count(metrics, "invalid") == 1


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "unannounced"])
def test_an_oversized_answer_is_refused_and_says_so(stub: Stub, declared: bool) -> None:
    body = json.dumps([gettable(pod=f"p-{i}") for i in range(200)]).encode()

    def big(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        if declared:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.close_connection = True

    stub.handler = big
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", max_body_bytes=10_000))
    assert "over the 10000-byte limit" in reason


def test_too_many_alerts_are_refused(stub: Stub) -> None:
    stub.json([gettable(pod=f"p-{i}") for i in range(11)])
    reason = _unavailable(_source(f"http://127.0.0.1:{stub.port}", max_alerts=10))
    assert "11 alerts, more than the 10" in reason


def test_an_answer_that_is_not_a_list_is_invalid(stub: Stub) -> None:
    stub.json({"alerts": []})
    metrics = Metrics()
    assert "expected a JSON list" in _unavailable(_source(f"http://127.0.0.1:{stub.port}", metrics=metrics))
    assert _count(metrics, "invalid") == 1


@pytest.mark.parametrize("entry", [
    42,
    {**gettable(pod="bad"), "status": "firing"},
    {**gettable(pod="bad"), "labels": {"namespace": "team-a"}},
    {**gettable(pod="bad"), "annotations": {"value": "lots"}},
    {**gettable(pod="bad"), "startsAt": "yesterday"},
], ids=["number", "status-not-object", "no-alertname", "value", "starts-at"])
def test_an_entry_that_does_not_parse_is_left_out_and_counted(stub: Stub, entry: Any) -> None:
    """Anyone can POST an alert into Alertmanager: one that does not parse must not make the source unavailable for
    the whole namespace (no donor anywhere in it); it is left out, counted, and the others are read."""
    stub.json([entry, gettable(pod="p-1")])
    metrics = Metrics()
    (alert,) = _source(f"http://127.0.0.1:{stub.port}", metrics=metrics).firing("team-a", ["GPUIdle"])
    assert alert.pod == "p-1"
    assert _count(metrics, "ok") == 2
    assert metrics.registry.get_sample_value("reactor_alert_source_entries_skipped_total", {}) == 2  # once per ask


# --- credentials ---

def test_the_token_file_is_sent_as_bearer_and_reread_when_it_changes(stub: Stub, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    source = _source(f"http://127.0.0.1:{stub.port}", token_file=str(token))
    source.firing("team-a", ["GPUIdle"])
    token.write_text("second-token-longer\n")
    time.sleep(CHECK_SECONDS)  # the file is checked at most once per CHECK_SECONDS (reactor/intake/bearer.py)
    source.firing("team-a", ["GPUIdle"])
    assert [h.get("Authorization") for _, h in stub.requests] == [
        "Bearer first-token", "Bearer first-token", "Bearer second-token-longer", "Bearer second-token-longer"]


def test_an_unreadable_or_empty_token_file_is_unavailable_and_nothing_is_asked(stub: Stub, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert "token file" in _unavailable(_source(f"http://127.0.0.1:{stub.port}", token_file=str(missing)))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert "is empty" in _unavailable(_source(f"http://127.0.0.1:{stub.port}", token_file=str(empty)))
    assert stub.requests == []


def test_https_is_verified_against_the_ca_file(tmp_path: Path) -> None:
    cert, stranger = Certificate(), Certificate()
    stub = Stub(cert.server_context())
    try:
        stub.json([gettable()])
        url = f"https://127.0.0.1:{stub.port}"
        assert [a.pod for a in _source(url, ca_file=str(cert.cert_file)).firing("team-a", ["GPUIdle"])] == ["p-0"]
        other = tmp_path / "other.pem"
        other.write_bytes(stranger.pem)  # a CA that did not sign the server's certificate
        assert "certificate verify failed" in _unavailable(_source(url, ca_file=str(other))).lower()
        assert "CA file" in _unavailable(_source(url, ca_file=str(tmp_path / "none.pem")))
    finally:
        stub.stop()
        cert.cleanup()
        stranger.cleanup()


# --- status and factory ---

def test_status_reads_version_and_cluster(stub: Stub) -> None:
    stub.json({"versionInfo": {"version": "0.28.1"}, "cluster": {"status": "ready", "peers": []}, "config": {}})
    assert _source(f"http://127.0.0.1:{stub.port}").status()["versionInfo"]["version"] == "0.28.1"
    stub.json({"status": "success", "data": {}})  # Prometheus's shape, a wrong URL
    with pytest.raises(AlertSourceUnavailable, match="/api/v2/status: not an alertmanagerStatus"):
        _source(f"http://127.0.0.1:{stub.port}").status()


def test_the_factory_builds_a_source_only_when_rebalancing_is_on() -> None:
    off = build_settings({"rebalance": {"alertmanagerUrl": "http://am:9093"}}, environ={})
    assert firing_source(off) is None
    on = build_settings({"rebalance": {"enabled": True, "alertmanagerUrl": "http://am:9093/",
                                       "alertmanagerTimeout": "2s"}}, environ={})
    source = firing_source(on)
    assert source is not None and source.url == "http://am:9093"


def test_every_result_is_zero_at_start() -> None:
    metrics = Metrics()
    SourceMetrics.of(metrics)  # the source's set, as the assembly declares it at start
    for result in ("ok", "unreachable", "timeout", "refused", "invalid"):
        assert metrics.registry.get_sample_value("reactor_alert_source_requests_total", {"result": result}) == 0



def test_a_url_with_a_bad_port_is_refused_at_construction_without_its_credentials() -> None:
    with pytest.raises(ReactorError, match="valid port") as caught:
        _source("http://user:secret@am:99999")
    assert "secret" not in str(caught.value) and "am:99999" in str(caught.value)


def test_the_url_s_credentials_are_never_printed_by_a_repr_or_a_config_error() -> None:
    """`user:password@` in rebalance.alertmanagerUrl becomes a Basic header: not in the client's repr, not in the
    config error a bad URL gets."""
    from reactor.config.settings import build_settings
    from reactor.core.errors import ConfigError
    from reactor.sources.http import Target

    target = Target.of("http://am-user:s3cret@am.monitoring:9093/prefix", "rebalance.alertmanagerUrl")
    assert target.basic is not None and "s3cret" not in repr(target) and target.basic not in repr(target)
    with pytest.raises(ConfigError) as refused:
        build_settings({"rebalance": {"alertmanagerUrl": "http://am-user:s3cret@am:9093/x?query=1"}}, environ={})
    assert "s3cret" not in str(refused.value) and "am:9093/x?query=1" in str(refused.value)
