"""The doctor's test alert: the timers it waits on, how it reads the reactor's /metrics, and the reactor's side.

End to end, through the real Alertmanager: tests/e2e/test_doctor_test_alert.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from reactor.app.assembly import declare_metrics
from reactor.app.cli import main
from reactor.core.metrics import Metrics
from reactor.core.model import TEST_ALERT
from reactor.engine.metrics import EngineMetrics
from reactor.intake.metrics import WebhookMetrics
from reactor.tools.doctor.delivery import alert_body, alert_labels, counts, sample, timers
from reactor.tools.doctor.http import Unreachable
from reactor.tools.payloads import AlertSpec, notification
from tests.deploy.deploy_helpers import DEPLOY
from tests.support import NAMESPACE, Reactor

LABELS = alert_labels("ml-workloads")


def _config(route: dict[str, object]) -> dict[str, object]:
    return {"route": route, "receivers": [{"name": "default"}, {"name": "gpu-reactor"}]}


@pytest.mark.parametrize(("route", "wait", "interval"), [
    ({"receiver": "default"}, 30, 300),  # Alertmanager's defaults
    ({"receiver": "default", "group_wait": "10s", "routes": [{"receiver": "gpu-reactor", "matchers": ['reactor="gpu"'],
                                                                "group_interval": "1m"}]}, 10, 60),  # inherited
    ({"receiver": "default", "routes": [
        {"receiver": "chat", "matchers": ['severity="warning"'], "group_wait": "2m", "continue": True},
        {"receiver": "gpu-reactor", "matchers": ['reactor="gpu"'], "group_wait": "5s"}]},
     120, 300),  # two routes take it: the longest wait
    ({"receiver": "default", "routes": [
        {"receiver": "gpu-reactor", "matchers": ['reactor="cpu"'], "group_wait": "1s"}]},
     30, 300),  # a route that does not match is not the alert's
], ids=["defaults", "inherited", "continue-takes-longest", "not-matching"])
def test_the_wait_is_the_routes_group_wait(route: dict[str, object], wait: int, interval: int) -> None:
    found = timers(_config(route), LABELS)
    assert (found.group_wait, found.group_interval) == (timedelta(seconds=wait), timedelta(seconds=interval))


def test_the_committed_alertmanager_config_waits_one_minute() -> None:
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yaml").read_text())
    assert timers(config, LABELS).group_wait == timedelta(minutes=1)


def test_the_alert_takes_the_gpu_route_and_ends_by_itself() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    (body,) = alert_body(LABELS, now, lasts=timedelta(minutes=6))
    assert body["labels"] == {"alertname": TEST_ALERT, "reactor": "gpu", "namespace": "ml-workloads",
                              "pod": "reactor-doctor-test", "container": "main", "severity": "warning"}
    assert (body["startsAt"], body["endsAt"]) == ("2026-12-01T12:00:00.000000Z", "2026-12-01T12:06:00.000000Z")


def _exposition(received: int = 0, rejected: int = 0) -> str:
    """The text a reactor's /metrics serves (its own Metrics, rendered by prometheus_client)."""
    metrics = Metrics(CollectorRegistry())
    declare_metrics(metrics)  # every stage's set, as the assembly declares them at start
    EngineMetrics.of(metrics).alerts_received.labels(alertname=TEST_ALERT, status="firing").inc(received)
    WebhookMetrics.of(metrics).webhook_requests.labels(code="401").inc(rejected)
    return generate_latest(metrics.registry).decode()


def test_a_fresh_reactor_exposes_the_counter_at_zero() -> None:
    assert sample(_exposition(), "reactor_alerts_received_total", {"alertname": TEST_ALERT, "status": "firing"}) == 0
    assert sample("# nothing here\n", "reactor_alerts_received_total", {"alertname": TEST_ALERT}) is None


def test_the_replicas_counts_are_summed_and_a_non_reactor_is_named() -> None:
    pages = {"http://a:8081": _exposition(2, 1), "http://b:8081/": _exposition(1)}
    got = counts(list(pages), pages.__getitem__)
    assert (got.received, got.rejected) == (3, 1)
    pages["http://c:8080"] = "# TYPE something_else_total counter\nsomething_else_total 1\n"
    with pytest.raises(Unreachable, match=r"http://c:8080/metrics has no reactor_alerts_received_total"):
        counts(list(pages), pages.__getitem__)


def test_asked_without_alertmanager_or_metrics_it_fails_saying_what_to_pass(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--send-test-alert", "--kubeconfig", "/nonexistent/kubeconfig"]) == 1
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if " test-alert " in ln]
    assert line.startswith("failing  test-alert") and "-> pass --alertmanager URL" in line


def test_without_the_flag_nothing_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    main(["doctor", "--kubeconfig", "/nonexistent/kubeconfig"])
    assert " test-alert " not in capsys.readouterr().out


def test_the_reactor_counts_the_test_alert_and_touches_nothing(reactor: Reactor) -> None:
    """In an allowed namespace or not, firing or resolved: counted, answered `test-alert`, no API call."""
    before = dict(reactor.sim.requests)
    body = notification([AlertSpec(TEST_ALERT, NAMESPACE, "reactor-doctor-test", "main"),
                         AlertSpec(TEST_ALERT, "kube-system", "reactor-doctor-test", "main"),
                         AlertSpec(TEST_ALERT, NAMESPACE, "reactor-doctor-test", "main", status="resolved")])
    r = reactor.post(body)
    assert r.status_code == 200, r.get_json()
    assert {(o["result"], o["reason"], o["workload"]) for o in r.get_json()["outcomes"]} == {
        ("skipped", "test-alert", None)}
    assert reactor.metric("reactor_alerts_received_total", alertname=TEST_ALERT, status="firing") == 2
    assert reactor.metric("reactor_alerts_received_total", alertname=TEST_ALERT, status="resolved") == 1
    assert reactor.metric("reactor_alerts_received_total", alertname="other", status="firing") == 0
    assert reactor.metric("reactor_alerts_skipped_total", reason="test-alert") == 3
    assert dict(reactor.sim.requests) == before, "no read, no write"


def test_the_doctor_flags_are_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    assert "--send-test-alert" in readme and "--reactor-metrics" in readme and "| `test-alert` |" in readme
