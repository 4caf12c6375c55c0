"""The rebalancer's alert source against a real Alertmanager: only the active, unsilenced, uninhibited alerts of
the namespace and names asked, parsed as the webhook parses them.

Alertmanager runs alone here (no Prometheus): the alerts are posted to it as Prometheus posts them
(`POST /api/v2/alerts`, postableAlerts; prometheus/notifier sends the same body), one is silenced through
`POST /api/v2/silences`, one is muted by an inhibit rule whose source alert fires.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reactor.config.settings import AlertSource, build_settings
from reactor.core.errors import AlertSourceUnavailable
from reactor.core.metrics import Metrics
from reactor.core.model import Status
from reactor.sources.alertmanager import AlertmanagerAlerts
from reactor.tools.doctor import Sources, diagnose
from reactor.tools.doctor.report import Status as CheckStatus
from reactor.tools.launcher import free_port
from tests.promstack.stack import PromStack, lone_alertmanager

pytestmark = pytest.mark.promstack

DONORS = ("GPUUnderutilized", "GPUIdle")
CONFIG = {
    "route": {"receiver": "null", "group_wait": "1h"},
    "receivers": [{"name": "null"}],
    # The target GPUIdle is muted while a `Maintenance` alert fires for the same pod (inhibit.go: source
    # matchers, target matchers, `equal` labels).
    "inhibit_rules": [{"source_matchers": ['alertname="Maintenance"'], "target_matchers": ['alertname="GPUIdle"'],
                       "equal": ["pod"]}],
}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _alert(name: str, pod: str, *, namespace: str = "team-a", exported: str | None = None, value: str = "0.1",
           resolved: bool = False) -> dict[str, Any]:
    """A postableAlert as the reactor's rules produce it (labels of dcgm-exporter's series, `value` and `gpus`
    annotations); `exported`: the workload's namespace in the exported_* spelling, `namespace` the exporter's."""
    now = datetime.now(UTC)
    labels = {"alertname": name, "reactor": "gpu", "severity": "warning", "namespace": namespace, "pod": pod,
              "container": "main"}
    if exported is not None:
        labels.update(exported_namespace=exported, exported_pod=pod, exported_container="trainer",
                      pod="nvidia-dcgm-exporter-abcde", container="nvidia-dcgm-exporter")
    return {"labels": labels, "annotations": {"value": value, "gpus": "4", "summary": f"{name} {pod}"},
            "startsAt": _stamp(now - timedelta(minutes=30)),
            "endsAt": _stamp(now - timedelta(minutes=1) if resolved else now + timedelta(hours=1)),
            "generatorURL": "http://prometheus.example/graph?g0.expr=x"}


def _post(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        raw = response.read()
    return json.loads(raw) if raw.strip() else None


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with lone_alertmanager(tmp_path_factory.mktemp("firing"), CONFIG) as url:
        yield url


@pytest.fixture(scope="module")
def posted(alertmanager: str) -> str:
    _post(f"{alertmanager}/api/v2/alerts", [
        _alert("GPUUnderutilized", "a-0", namespace="gpu-operator", exported="team-a", value="0.12"),  # kept
        _alert("GPUIdle", "a-1", value="0.01"),  # kept: the plain spelling
        _alert("GPUIdle", "a-2", namespace="gpu-operator", exported="team-a"),  # silenced below
        _alert("GPUIdle", "a-3"),  # inhibited by Maintenance on a-3
        _alert("Maintenance", "a-3"),
        _alert("GPUSaturated", "a-4", value="0.99"),  # a name not asked
        _alert("GPUIdle", "a-5", resolved=True),  # ended a minute ago
        _alert("GPUIdle", "b-0", namespace="team-b"),
        # The exporter runs in team-a, the workload in team-b: the webhook's parser places it in team-b.
        _alert("GPUIdle", "b-1", namespace="team-a", exported="team-b"),
    ])
    now = datetime.now(UTC)
    _post(f"{alertmanager}/api/v2/silences", {
        "matchers": [{"name": "exported_pod", "value": "a-2", "isRegex": False, "isEqual": True}],
        "startsAt": _stamp(now - timedelta(seconds=1)), "endsAt": _stamp(now + timedelta(hours=1)),
        "createdBy": "tests/promstack/test_firing_source.py", "comment": "a silenced donor is not idle to us"})
    return alertmanager


def _source(url: str, metrics: Metrics | None = None) -> AlertmanagerAlerts:
    return AlertmanagerAlerts(AlertSource(url=url, timeout=timedelta(seconds=5)), metrics=metrics)


def _settled(source: AlertmanagerAlerts, namespace: str, names: tuple[str, ...], want: set[str]) -> set[str]:
    """The pods firing; polled briefly: the inhibitor learns of its source alert through a subscription."""
    deadline = time.monotonic() + 10
    while True:
        pods = {a.pod or "" for a in source.firing(namespace, names)}
        if pods == want or time.monotonic() > deadline:
            return pods
        time.sleep(0.2)


def test_firing_returns_the_active_unmuted_alerts_of_the_namespace_and_names(posted: str) -> None:
    metrics = Metrics()
    source = _source(posted, metrics)
    assert _settled(source, "team-a", DONORS, {"a-0", "a-1"}) == {"a-0", "a-1"}
    alerts = {a.pod: a for a in source.firing("team-a", DONORS)}
    a0, a1 = alerts["a-0"], alerts["a-1"]
    assert (a0.name, a0.status, a0.namespace, a0.container, a0.value, a0.gpus) == (
        "GPUUnderutilized", Status.FIRING, "team-a", "trainer", 0.12, 4)
    assert (a1.name, a1.namespace, a1.container, a1.value) == ("GPUIdle", "team-a", "main", 0.01)
    assert a0.labels["namespace"] == "gpu-operator" and a0.generator_url.startswith("http://prometheus.example")
    assert len(a0.fingerprint) == 16 and a0.ends_at is not None and a0.starts_at < a0.ends_at
    ok = metrics.registry.get_sample_value("reactor_alert_source_requests_total", {"result": "ok"})
    assert ok is not None and ok >= 4  # two requests per call: namespace="X" and exported_namespace="X"


def test_each_namespace_and_name_set_is_its_own(posted: str) -> None:
    source = _source(posted)
    assert _settled(source, "team-b", ("GPUIdle",), {"b-0", "b-1"}) == {"b-0", "b-1"}
    assert {a.pod for a in source.firing("team-a", ("GPUSaturated",))} == {"a-4"}
    assert source.firing("team-a", ("GPUUnderutilized",))[0].pod == "a-0"
    assert source.firing("team-c", DONORS) == ()
    assert source.firing("team-a", ()) == ()


def test_label_values_that_need_escaping_are_matched_literally(posted: str) -> None:
    """A value with quotes, backslashes and regex syntax reaches Alertmanager as a literal (both matchers)."""
    odd = 'we"ird\\ns.*'
    _post(f"{posted}/api/v2/alerts", [_alert("GPUIdle", "odd-0", namespace=odd), _alert("GPU.dle", "odd-1",
                                                                                         namespace=odd)])
    source = _source(posted)
    assert _settled(source, odd, ("GPUIdle",), {"odd-0"}) == {"odd-0"}
    assert {a.pod for a in source.firing(odd, ("GPU.dle",))} == {"odd-1"}
    assert source.firing("weXird\\ns", ("GPUIdle",)) == ()


def test_status_names_the_version_and_cluster(posted: str) -> None:
    status = _source(posted).status()
    assert status["versionInfo"]["version"]
    assert status["cluster"]["status"] == "disabled"  # --cluster.listen-address= turns clustering off


def test_a_stopped_alertmanager_is_unavailable_naming_the_url() -> None:
    port = free_port()
    with pytest.raises(AlertSourceUnavailable) as caught:
        _source(f"http://127.0.0.1:{port}").firing("team-a", DONORS)
    assert caught.value.reason.startswith(f"Alertmanager http://127.0.0.1:{port}/api/v2/alerts: ")


def test_doctor_checks_the_rebalancers_alertmanager_and_the_donor_rules(stack: PromStack) -> None:
    """The session stack: Prometheus with the reactor's rules loaded, Alertmanager with deploy/alertmanager's route."""
    settings = build_settings({"namespaces": {"allow": ["ml-workloads"]},
                               "rebalance": {"enabled": True, "alertmanagerUrl": stack.alertmanager_url}}, environ={})
    checks = [c for c in diagnose(Sources(prometheus=stack.prometheus_url), settings, "no cluster")
              if c.name.startswith("rebalance")]
    assert [(c.name, c.status) for c in checks] == [
        ("rebalance-source", CheckStatus.OK), ("rebalance-source", CheckStatus.OK),
        ("rebalance-donor-rules", CheckStatus.OK)], checks
    assert re.search(r"Alertmanager \d+\.\d+\.\d+\S*, cluster disabled \(a single instance\)", checks[0].detail)
    assert "GPUUnderutilized, GPUIdle are loaded alerting rules" in checks[2].detail
