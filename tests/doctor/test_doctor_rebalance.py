"""`reactor doctor` with `rebalance.enabled`: the Alertmanager the rebalancer asks, with the reactor's configured
URL and auth, and the donor alerts among Prometheus's loaded rules. A real Alertmanager and Prometheus answer in
tests/promstack/test_firing_source.py; here a local stub plays a locked or foreign server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.app.cli import main
from reactor.config.settings import Settings, build_settings
from reactor.tools.doctor import Sources, diagnose, rebalance
from reactor.tools.doctor.report import Check, Status, exit_code
from tests.sources.test_firing_source import Stub, _send, gettable

STATUS = {"versionInfo": {"version": "0.28.1", "revision": "x"}, "cluster": {"status": "ready", "peers": [
    {"name": "a", "address": "10.0.0.1:9094"}, {"name": "b", "address": "10.0.0.2:9094"}]},
    "config": {"original": ""}, "uptime": "2026-12-01T00:00:00.000Z"}


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.stop()


def _settings(url: str, **extra: Any) -> Settings:
    return build_settings({"namespaces": {"allow": ["team-a"]},
                           "rebalance": {"enabled": True, "alertmanagerUrl": url, **extra}}, environ={})


def _serve(stub: Stub, alerts: list[dict[str, Any]]) -> None:
    def answer(h: Any) -> None:
        body = STATUS if h.path.startswith("/api/v2/status") else alerts
        _send(h, 200, json.dumps(body).encode())

    stub.handler = answer


def _rebalance_lines(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.name.startswith("rebalance")]


def test_a_reachable_alertmanager_is_named_with_its_version_cluster_and_the_answer(stub: Stub) -> None:
    _serve(stub, [gettable("GPUIdle", "p-0")])
    checks = _rebalance_lines(diagnose(Sources(), _settings(f"http://127.0.0.1:{stub.port}"), "no cluster"))
    assert [(c.name, c.status) for c in checks] == [
        (rebalance.SOURCE, Status.OK), (rebalance.SOURCE, Status.OK), (rebalance.RULES, Status.WARNING)]
    assert "Alertmanager 0.28.1, cluster ready (2 peers)" in checks[0].detail
    assert "1 of GPUUnderutilized, GPUIdle firing now in team-a" in checks[1].detail
    assert "not checked" in checks[2].detail


def test_a_token_the_proxy_refuses_fails_the_preflight(stub: Stub, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("wrong\n")
    stub.handler = lambda h: _send(h, 401, b"Unauthorized", "text/plain")
    checks = diagnose(Sources(), _settings(f"http://127.0.0.1:{stub.port}", alertmanagerTokenFile=str(token)),
                      "no cluster")
    (source,) = [c for c in checks if c.name == rebalance.SOURCE]
    assert source.status is Status.FAILING and "/api/v2/status: HTTP 401" in source.detail
    assert exit_code(checks) == 1
    assert stub.requests[0][1]["Authorization"] == "Bearer wrong"


def test_a_status_that_answers_and_a_question_that_does_not_is_named(stub: Stub) -> None:
    """A proxy that lets /api/v2/status through and not /api/v2/alerts: the rebalancer's own question fails."""
    stub.handler = lambda h: (_send(h, 200, json.dumps(STATUS).encode()) if h.path.startswith("/api/v2/status")
                              else _send(h, 403, b"Forbidden", "text/plain"))
    checks = _rebalance_lines(diagnose(Sources(), _settings(f"http://127.0.0.1:{stub.port}"), "no cluster"))
    assert [c.status for c in checks[:2]] == [Status.OK, Status.FAILING]
    assert "/api/v2/alerts: HTTP 403" in checks[1].detail


def test_a_settling_cluster_is_a_warning(stub: Stub) -> None:
    status = {**STATUS, "cluster": {"status": "settling", "peers": []}}
    stub.handler = lambda h: _send(h, 200, json.dumps(status if h.path.startswith("/api/v2/status") else []).encode())
    checks = _rebalance_lines(diagnose(Sources(), _settings(f"http://127.0.0.1:{stub.port}"), "no cluster"))
    assert checks[0].status is Status.WARNING and "not settled" in checks[0].detail


def test_donor_alerts_missing_from_the_loaded_rules_fail() -> None:
    rules = [{"type": "alerting", "name": "GPUUnderutilized"}, {"type": "recording", "name": "GPUIdle"}]
    check = rebalance.donor_rules(rules, ("GPUUnderutilized", "GPUIdle"))
    assert check.status is Status.FAILING and "GPUIdle not among the loaded alerting rules" in check.detail
    assert rebalance.donor_rules(rules, ("GPUUnderutilized",)).status is Status.OK


def test_rebalancing_off_adds_no_line() -> None:
    settings = build_settings({"rebalance": {"alertmanagerUrl": "http://127.0.0.1:1"}}, environ={})
    assert _rebalance_lines(diagnose(Sources(), settings, "no cluster")) == []


def test_the_command_exits_1_when_the_source_is_unreachable(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from reactor.tools.launcher import free_port

    config = tmp_path / "policy.yaml"
    config.write_text(f"rebalance:\n  enabled: true\n  alertmanagerUrl: http://127.0.0.1:{free_port()}\n"
                      "  alertmanagerTimeout: 1s\n")
    code = main(["doctor", "--config", str(config), "--kubeconfig", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert code == 1
    assert any(line.startswith("failing  rebalance-source") for line in out.splitlines()), out


def test_a_status_of_another_shape_is_read_without_a_traceback(stub: Stub) -> None:
    """Alertmanager's answer is not trusted for its shape: `peers` a number, the version missing."""
    def answer(h: Any) -> None:
        body: Any = {"versionInfo": {}, "cluster": {"status": "ready", "peers": 3}}
        _send(h, 200, json.dumps(body if h.path.startswith("/api/v2/status") else []).encode())

    stub.handler = answer
    checks = _rebalance_lines(diagnose(Sources(), _settings(f"http://127.0.0.1:{stub.port}"), "no cluster"))
    assert checks[0].status is Status.OK and "Alertmanager unknown, cluster ready (0 peers)" in checks[0].detail
