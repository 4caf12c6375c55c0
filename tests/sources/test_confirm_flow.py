"""The confirm step through the webhook (Flask test client, the embedded cluster over real HTTP, the confirm client
over real HTTP to the Prometheus stand-in), with the test saying itself what Prometheus's rules fire.

An alert posted into Alertmanager by anyone reaches the reactor with Alertmanager's valid token: only what
Prometheus's rule state fires is acted on, sized by Prometheus's value.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.config.settings import build_settings, warnings
from reactor_sim import SimCluster
from tests.engine.test_rebalance_flow import (  # noqa: F401, F811 (cluster: a fixture)
    Source,
    _full,
    _idle,
    _outcome,
    _reactor,
    cluster,
)
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

APP, CONTAINER = "llm-inference", "server"  # tests/fixtures/cluster.yaml: 4 GPUs per pod


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, make_settings(token_file), feed=False)
    try:
        yield r
    finally:
        r.service.kube.close()


def _gpus(sim: SimCluster) -> str:
    d = sim.get("deployments", NAMESPACE, APP)
    return str(d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])


def _version(sim: SimCluster) -> str:
    return str(sim.get("deployments", NAMESPACE, APP)["metadata"]["resourceVersion"])


def _rules_fire(r: Reactor, body: dict[str, Any], value: float) -> None:
    """Prometheus's rules fire the alerts of `body`, their expression valued `value`."""
    assert r.prometheus is not None
    for alert in body["alerts"]:
        r.prometheus.hold(alert["labels"], {**alert["annotations"], "value": f"{value:.3f}"}, value)


def test_a_forged_alert_is_unconfirmed_and_writes_nothing(reactor: Reactor) -> None:
    before = _version(reactor.sim)
    body = reactor.alerts("GPUUnderutilized", APP, CONTAINER, value=0.01, gpus=4)
    answer = reactor.post(body)
    assert answer.status_code == 200
    outcomes = answer.get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "unconfirmed")}
    assert "does not fire GPUUnderutilized for ml-workloads/" in outcomes[0]["detail"]
    assert _version(reactor.sim) == before and _gpus(reactor.sim) == "4"
    assert reactor.metric("reactor_alerts_skipped_total", reason="unconfirmed") == len(outcomes)


def test_the_genuine_alert_is_sized_by_prometheus_not_by_its_annotation(reactor: Reactor) -> None:
    """The annotation says 1% (one GPU would do); Prometheus measures 40%: ceil(4 × 0.4 / 0.6) = 3 GPUs."""
    body = reactor.alerts("GPUUnderutilized", APP, CONTAINER, value=0.01, gpus=4)
    _rules_fire(reactor, body, 0.40)
    outcomes = reactor.post(body).get_json()["outcomes"]
    assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("applied", 4, 3)}, outcomes
    assert _gpus(reactor.sim) == "3"


def test_a_resolve_prometheus_still_fires_reverts_nothing(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", APP, CONTAINER, value=0.01, gpus=4)
    _rules_fire(reactor, body, 0.01)
    assert {o["result"] for o in reactor.post(body).get_json()["outcomes"]} == {"applied"}
    resolved = dict(body, status="resolved",
                    alerts=[dict(a, status="resolved", endsAt="2026-12-04T00:00:00Z") for a in body["alerts"]])
    before = _version(reactor.sim)
    outcomes = reactor.post(resolved).get_json()["outcomes"]
    assert {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "still-firing")}
    assert _version(reactor.sim) == before and _gpus(reactor.sim) == "1"
    assert reactor.prometheus is not None
    reactor.prometheus.clear()  # Prometheus stops firing: the same resolve, delivered again, reaches the policy
    outcomes = reactor.post(resolved).get_json()["outcomes"]
    assert {o["reason"] for o in outcomes} == {"resolved"}  # the policy's own answer (a shrink is not reverted)


def test_prometheus_down_is_503_and_no_write(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", APP, CONTAINER, value=0.01, gpus=4)
    _rules_fire(reactor, body, 0.01)
    assert reactor.prometheus is not None
    reactor.prometheus.available = False
    before = _version(reactor.sim)
    answer = reactor.post(body)
    assert answer.status_code == 503 and "Prometheus" in answer.get_json()["error"]
    assert _version(reactor.sim) == before
    reactor.prometheus.available = True  # Alertmanager's retry then succeeds
    assert {o["result"] for o in reactor.post(body).get_json()["outcomes"]} == {"applied"}


def test_a_resolve_is_503_too_when_prometheus_cannot_say(reactor: Reactor) -> None:
    body = reactor.alerts("GPUUnderutilized", APP, CONTAINER, value=0.01, gpus=4)
    _rules_fire(reactor, body, 0.01)
    reactor.post(body)
    assert reactor.prometheus is not None
    reactor.prometheus.stop()
    resolved = dict(body, status="resolved", alerts=[dict(a, status="resolved") for a in body["alerts"]])
    assert reactor.post(resolved).status_code == 503
    assert _gpus(reactor.sim) == "1"  # never reverted unconfirmed


def test_confirm_asks_once_per_notification_whatever_its_namespaces(sim: SimCluster, token_file: Path) -> None:
    r = build_reactor(sim, make_settings(token_file, namespaces={"allow": ["*"]}), feed=False)
    try:
        assert r.prometheus is not None
        specs = [(ns, f"pod-{i}") for ns in ("ml-workloads", "team-a", "team-b", "team-c") for i in range(25)]
        from reactor.tools.payloads import AlertSpec, notification
        body = notification([AlertSpec("GPUIdle", ns, pod, "main", 0.0, 1) for ns, pod in specs])
        for namespaces in (1, 4):
            before = len(r.prometheus.requests)
            sent = dict(body, alerts=[a for a in body["alerts"]
                                      if a["labels"]["namespace"] in ("ml-workloads", "team-a", "team-b",
                                                                      "team-c")[:namespaces]])
            assert r.post(sent).status_code == 200
            assert len(r.prometheus.requests) - before == 1, (namespaces, list(r.prometheus.requests))
        before = len(r.prometheus.requests)  # nothing passes screening (kube-system is denied): nothing asked
        r.post(notification([AlertSpec("GPUIdle", "kube-system", "x", "main", 0.0, 1)]))
        assert len(r.prometheus.requests) == before
    finally:
        r.service.kube.close()


def test_confirm_off_is_said_to_be_trusting_whoever_reaches_alertmanager() -> None:
    url = {"prometheusUrl": "http://prometheus.monitoring:9090"}
    assert not [w for w in warnings(build_settings({"namespaces": {"allow": ["a"]}, "confirm": url}, {}))
                if "confirm" in w]
    # No URL: valid as a file (the environment may set it), but `reactor serve` would refuse it: check-config says so.
    (said,) = [w for w in warnings(build_settings({"namespaces": {"allow": ["a"]}}, {})) if "confirm" in w]
    assert "confirm.prometheusUrl is not set" in said and "refuses to start" in said
    (said,) = [w for w in warnings(build_settings({"namespaces": {"allow": ["a"]}, "confirm": {"enabled": False}}, {}))
               if "confirm" in w]
    assert "trusts whoever can reach Alertmanager" in said


def test_a_forged_idle_donor_never_gives(cluster: SimCluster, token_file: Path) -> None:  # noqa: F811
    """Alertmanager shows training idle (anyone could have posted that alert there), Prometheus's rules do not fire
    it: no donor. Once Prometheus fires it too, training gives, sized by Prometheus's value."""
    _full(cluster)
    before = cluster.get("deployments", NAMESPACE, "training")["metadata"]["resourceVersion"]
    source = Source(_idle(cluster, "training"))
    r = _reactor(cluster, token_file, source)
    source.rules = None  # Alertmanager holds the idle alerts; Prometheus's rule state does not
    outcome = _outcome(r, "inference")
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "no donor" in outcome["detail"], outcome
    assert cluster.get("deployments", NAMESPACE, "training")["metadata"]["resourceVersion"] == before
    assert r.prometheus is not None
    for alert in source.alerts:  # now the rules fire them
        r.prometheus.hold(alert.labels, alert.annotations, 0.05)
    outcome = _outcome(r, "inference", starts_at=datetime.now(UTC) + timedelta(seconds=1))
    assert "rebalance: Deployment/training gave" in outcome["detail"], outcome["detail"]
