"""`reactor doctor --send-test-alert` through the real Alertmanager to the running reactor, and where it fails.

Delivered: the e2e pipeline's Alertmanager (deploy/alertmanager's route, group_wait 1s) relays through the
sink to `reactor serve`, whose /metrics (probe port) shows the alert counted, and whose answer shows it did
nothing. Not delivered: a second real Alertmanager whose reactor="gpu" route goes to another webhook, or to
the reactor with another token (answered 401); and a reactor whose metrics port does not answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.config.settings import load_settings
from reactor.core.model import TEST_ALERT
from reactor.tools.doctor import Sources, diagnose
from reactor.tools.doctor.alertmanager import loaded_config
from reactor.tools.doctor.delivery import NAME, send_test_alert
from reactor.tools.doctor.report import Check, Status
from reactor.tools.launcher import free_port
from tests.e2e.pipeline import NAMESPACE, POLICY, Pipeline
from tests.promstack.stack import WebhookSink, _spawn, _wait_ready

pytestmark = pytest.mark.promstack


def _test_alert_line(checks: list[Check]) -> Check:
    (check,) = [c for c in checks if c.name == NAME]
    return check


def test_the_test_alert_reaches_the_reactor_which_does_nothing(e2e_pipeline: Pipeline, tmp_path: Path) -> None:
    p = e2e_pipeline
    skips_before = p.reactor.metric("reactor_alerts_skipped_total", reason="test-alert")
    workloads = ("deployments", "statefulsets", "cronjobs", "pods")
    patches_before = {r: n for r, n in p.patches().items() if r in workloads}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    sources = Sources(alertmanager=p.stack.alertmanager_url, send_test_alert=True,
                      reactor_metrics=(p.reactor.child.probe_url,))
    check = _test_alert_line(diagnose(sources, load_settings(policy, environ={}), "no cluster in this test"))

    assert check.status is Status.OK, check
    assert f'{TEST_ALERT} in {NAMESPACE} (reactor="gpu") reached the reactor' in check.detail
    took = float(check.detail.split("reached the reactor ")[1].split("s after")[0])
    print(f"\ntest alert: Alertmanager -> reactor counted in {took:.1f} s (group_wait 1s)")
    # The reactor's answer to that notification: acknowledged, nothing done, to no workload.
    delivery = p.delivery(lambda d: any(a["labels"]["alertname"] == TEST_ALERT for a in d.body["alerts"]),
                          timeout=5, what="the test alert's notification")
    assert delivery.status == 200
    (outcome,) = delivery.answer["outcomes"]
    assert (outcome["result"], outcome["reason"], outcome["workload"]) == ("skipped", "test-alert", None)
    assert p.reactor.metric("reactor_alerts_skipped_total", reason="test-alert") > skips_before
    assert {r: n for r, n in p.patches().items() if r in workloads} == patches_before


class OtherAlertmanager:
    """Real Alertmanagers beside the pipeline's, each routing reactor="gpu" to the webhook it is given."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir = binary, workdir
        self.processes: list[Any] = []  # stack._Process: stopped by PID by the fixture

    def start(self, webhook: dict[str, object], group_wait: str = "1s", group_interval: str = "2s") -> str:
        workdir = self.workdir / str(len(self.processes))
        workdir.mkdir()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        config = {"route": {"receiver": "default", "routes": [
            {"receiver": "gpu", "matchers": ['reactor="gpu"'], "group_by": ["namespace", "alertname"],
             "group_wait": group_wait, "group_interval": group_interval}]},
            "receivers": [{"name": "default"}, {"name": "gpu", "webhook_configs": [webhook]}]}
        (workdir / "alertmanager.yaml").write_text(yaml.safe_dump(config))
        process = _spawn("alertmanager", [
            self.binary, f"--config.file={workdir / 'alertmanager.yaml'}", f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}", f"--web.external-url={url}", "--cluster.listen-address="],
            workdir)
        self.processes.append(process)
        _wait_ready(process, url, 20)
        return url


@pytest.fixture
def other_alertmanager(e2e_binaries: dict[str, str], tmp_path: Path) -> Iterator[OtherAlertmanager]:
    others = OtherAlertmanager(e2e_binaries["alertmanager_bin"], tmp_path)
    try:
        yield others
    finally:
        for process in others.processes:
            process.stop()


@pytest.fixture
def elsewhere(other_alertmanager: OtherAlertmanager) -> Iterator[tuple[str, WebhookSink]]:
    """A real Alertmanager whose reactor="gpu" route posts to a webhook that is not the reactor."""
    sink = WebhookSink().start()
    try:
        yield other_alertmanager.start({"url": sink.url}), sink
    finally:
        sink.stop()


def test_a_route_to_another_webhook_fails_with_what_to_do(e2e_pipeline: Pipeline,
                                                           elsewhere: tuple[str, WebhookSink]) -> None:
    am_url, other = elsewhere
    check = send_test_alert(am_url, loaded_config(am_url), NAMESPACE, [e2e_pipeline.reactor.child.probe_url],
                            margin=timedelta(seconds=4))
    assert check.status is Status.FAILING, check
    assert "did not count it within 5s (group_wait 1s + 4s)" in check.detail
    assert "reactor-webhook" in check.fix and "--reactor-metrics" in check.fix
    # It did leave Alertmanager: the other webhook got it.
    other.wait_for(lambda d: any(a["labels"]["alertname"] == TEST_ALERT for a in d.body["alerts"]), timeout=5)


def test_a_reactor_that_does_not_answer_fails_before_sending(e2e_pipeline: Pipeline,
                                                             elsewhere: tuple[str, WebhookSink]) -> None:
    am_url, other = elsewhere
    closed = f"http://127.0.0.1:{free_port()}"
    check = send_test_alert(am_url, loaded_config(am_url), NAMESPACE, [closed])
    assert check.status is Status.FAILING
    assert check.detail.startswith(f"not sent: {closed}/metrics:") and "port-forward" in check.fix
    # The webhook port is no metrics port either: it is named, not waited on.
    check = send_test_alert(am_url, loaded_config(am_url), NAMESPACE, [e2e_pipeline.reactor.url])
    assert check.status is Status.FAILING and "not sent:" in check.detail
    assert not other.deliveries


def test_a_route_with_another_token_fails_naming_the_401s(e2e_pipeline: Pipeline,
                                                          other_alertmanager: OtherAlertmanager) -> None:
    reactor = e2e_pipeline.reactor
    am_url = other_alertmanager.start({"url": f"{reactor.url}/alerts",
                                       "http_config": {"authorization": {"credentials": "not-the-reactors-token"}}})
    check = send_test_alert(am_url, loaded_config(am_url), NAMESPACE, [reactor.child.probe_url],
                            margin=timedelta(seconds=4))
    assert check.status is Status.FAILING, check
    assert "the reactor answered 401 to" in check.detail and "token Secret" in check.fix


def test_a_rerun_right_after_passes_too(e2e_pipeline: Pipeline, other_alertmanager: OtherAlertmanager) -> None:
    """Issue 28: a rerun used to land in the group Alertmanager still held and time out after group_wait. Now each
    run's pod is its own, and a run that joins the held group (the route groups by [namespace, alertname]) waits
    that group's group_interval (here 10 s, far above group_wait 1 s + the 3 s margin)."""
    from tests.e2e.conftest import TOKEN

    reactor = e2e_pipeline.reactor
    am_url = other_alertmanager.start({"url": f"{reactor.url}/alerts",
                                       "http_config": {"authorization": {"credentials": TOKEN}}},
                                      group_wait="1s", group_interval="10s")
    checks = [send_test_alert(am_url, loaded_config(am_url), NAMESPACE, [reactor.child.probe_url],
                              margin=timedelta(seconds=3)) for _ in range(2)]
    assert [c.status for c in checks] == [Status.OK] * 2, checks
