"""End to end, the confirm step: the real Prometheus's rule state decides what the real reactor acts on.

Anyone who reaches Alertmanager's API can POST an alert there, and Alertmanager delivers it to the reactor with its
valid token. Here such alerts are posted into the stack's real Alertmanager (`POST /api/v2/alerts`, as Prometheus
posts them) for a workload the rules do not fire on; a hop that rewrites the annotations is played by the webhook
sink; and Prometheus is paused (SIGSTOP) to play one that cannot answer. The workload is `sizer` (tests/e2e/seed.yaml:
1 pod × 4 GPUs), which no other scenario touches. Runs after test_pipeline.py (its counts are of the whole run).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, alert_body, notification, rfc3339
from tests.e2e.pipeline import NAMESPACE, NORMAL, Pipeline, gpus, outcomes_for
from tests.promstack.stack import Delivery

pytestmark = pytest.mark.promstack

APP, CONTAINER = "sizer", "server"
TIMEOUT = 60.0
TOKEN = "e2e-webhook-token-0123456789abcdef"  # tests/e2e/conftest.py


SEEN: dict[str, Any] = {}  # what an earlier scenario of this module saw (the genuine alert, for the replay)


def _post_to_alertmanager(p: Pipeline, alerts: list[dict[str, Any]], *, starts: datetime,
                          lasts: timedelta = timedelta(seconds=15)) -> None:
    """What anyone who reaches 9093 can do: POST postableAlerts, as Prometheus does (labels, annotations, times)."""
    now = datetime.now(UTC)
    postable = [{"labels": a["labels"], "annotations": a["annotations"], "startsAt": rfc3339(starts),
                 "endsAt": rfc3339(now + lasts), "generatorURL": a["generatorURL"]} for a in alerts]
    request = urllib.request.Request(f"{p.stack.alertmanager_url}/api/v2/alerts", data=json.dumps(postable).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass


def _post_to_reactor(p: Pipeline, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{p.reactor.url}/alerts", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _generation(p: Pipeline) -> int:
    return int(p.workload("deployments", APP)["metadata"]["generation"])


def _answered(p: Pipeline, pods: list[str], reason: str, after: float) -> Delivery:
    return p.delivery(lambda d: d.at >= after and any(o.get("reason") == reason
                                                      for o in outcomes_for(d, "GPUUnderutilized", "firing", pods)),
                      timeout=TIMEOUT, what=f"an answer {reason} for {pods}")


def test_1_an_alert_posted_into_alertmanager_is_delivered_and_answered_unconfirmed(e2e_pipeline: Pipeline) -> None:
    p = e2e_pipeline
    pods = p.pods(APP)
    before, unconfirmed = _generation(p), p.reactor.metric("reactor_alerts_skipped_total", reason="unconfirmed")
    posted = time.monotonic()
    # Labels of its own choosing (severity critical): a forged alert with exactly the rule's labels would be merged
    # by Alertmanager with the genuine one when the rules fire, delaying that one's delivery (docs/confirm.md).
    forged = [alert_body(AlertSpec("GPUUnderutilized", NAMESPACE, pod, CONTAINER, 0.01, 4,
                                   extra_labels={"severity": "critical"}), datetime.now(UTC)) for pod in pods]
    _post_to_alertmanager(p, forged, starts=datetime.now(UTC))
    delivery = _answered(p, pods, "unconfirmed", posted)
    assert delivery.authorization == f"Bearer {TOKEN}"  # Alertmanager's valid credentials, all the same
    (outcome,) = outcomes_for(delivery, "GPUUnderutilized", "firing", pods)
    assert "does not fire GPUUnderutilized" in outcome["detail"]
    assert _generation(p) == before and gpus(p.workload("deployments", APP), CONTAINER) == ("4", "4")
    assert p.reactor.metric("reactor_alerts_skipped_total", reason="unconfirmed") > unconfirmed


def test_2_the_genuine_alert_is_sized_by_prometheus_and_its_resolve_waits_for_prometheus(
        e2e_pipeline: Pipeline) -> None:
    """The rules fire for sizer at 0.20 (ceil(4 × 0.2 / 0.6) = 2 GPUs); on the way its `value` annotation is rewritten
    to 0.01 (which would size to 1). The reactor applies 4 → 2. At once — Prometheus still fires the alert, the pod's
    utilization window has not passed — a resolve for it, delivered with the webhook's token, reverts nothing."""
    p = e2e_pipeline
    pods = p.pods(APP)

    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        for alert in body.get("alerts", []):
            if alert.get("labels", {}).get("pod") in pods:
                alert["annotations"]["value"] = "0.010"
        return body

    p.sink.rewrite = tamper
    try:
        p.mirror.set_demand(APP, "deployments", APP, 0.80)  # 4 GPUs at 0.20
        applied = p.delivery(lambda d: any(o["result"] == "applied"
                                           for o in outcomes_for(d, "GPUUnderutilized", "firing", pods)),
                             timeout=TIMEOUT, what="sizer's GPUUnderutilized applied")
    finally:
        p.sink.rewrite = None
    (alert,) = [a for a in applied.body["alerts"] if a["labels"]["pod"] in pods and a["status"] == "firing"
                and a["labels"].get("severity") != "critical"]
    resolved = dict(applied.body, status="resolved",
                    alerts=[dict(alert, status="resolved", endsAt=rfc3339(datetime.now(UTC)))])
    code, answer = _post_to_reactor(p, resolved)
    SEEN["genuine"] = alert
    # The forgery of scenario 1, if Alertmanager still holds it, names the same container: folded into the same
    # decision (one write per workload), it shares the genuine alert's outcome.
    outcome = next(o for o in outcomes_for(applied, "GPUUnderutilized", "firing", pods) if o["result"] == "applied")
    assert alert["annotations"]["value"] == "0.010"  # what the reactor was told
    assert (outcome["action"], outcome["from"], outcome["to"]) == ("resize-gpu", 4, 2), outcome
    assert code == 200 and answer["outcomes"][0]["reason"] == "still-firing", answer
    p.wait(lambda: gpus(p.workload("deployments", APP), CONTAINER) == ("2", "2"), timeout=10, what="sizer at 2 GPUs")


def test_3_an_alert_resent_after_prometheus_stopped_firing_it_is_unconfirmed(e2e_pipeline: Pipeline) -> None:
    """The genuine alert of scenario 2, replayed into Alertmanager (labels, annotations and all) once Prometheus no
    longer fires it: delivered again, answered `unconfirmed`."""
    p = e2e_pipeline
    genuine = SEEN.get("genuine")
    if genuine is None:
        pytest.skip("scenario 2 did not run")
    p.mirror.set_demand(APP, "deployments", APP, NORMAL[APP][2] / 2)  # 2 GPUs at 0.62: nothing fires
    pod = genuine["labels"]["pod"]
    query = f'ALERTS{{alertname="GPUUnderutilized",namespace="{NAMESPACE}",pod="{pod}"}}'
    p.wait(lambda: not p.stack.query(query) or None, timeout=TIMEOUT, what="the genuine alert no longer active")
    time.sleep(3)  # Alertmanager has it resolved; a replay is a new firing
    before = _generation(p)
    posted = time.monotonic()
    # As the other replica of an HA pair would send it late (its own `prometheus_replica` external label): a copy of
    # Prometheus's own labels would be overwritten at once by the resolved alert Prometheus keeps re-sending.
    replay = dict(genuine, labels={**genuine["labels"], "prometheus_replica": "prometheus-b"})
    _post_to_alertmanager(p, [replay], starts=datetime.now(UTC))
    _answered(p, [pod], "unconfirmed", posted)
    assert _generation(p) == before


def test_4_prometheus_that_cannot_answer_is_a_503_and_no_write(e2e_pipeline: Pipeline) -> None:
    p = e2e_pipeline
    pods = p.pods(APP)
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, pod, CONTAINER, 0.01, 2) for pod in pods])
    prometheus = next(process for process in p.stack.processes if process.name == "prometheus")
    before = _generation(p)
    os.kill(prometheus.popen.pid, signal.SIGSTOP)  # it stops answering: connections hang, the confirm times out
    try:
        # The reactor reuses Prometheus's last answer until the rules' next evaluation (every 1s with the fast
        # values): past it, the answer no longer holds and the reactor must ask the stopped Prometheus.
        time.sleep(1.5)
        started = time.monotonic()
        code, answer = _post_to_reactor(p, body)
        took = time.monotonic() - started
    finally:
        os.kill(prometheus.popen.pid, signal.SIGCONT)
    assert code == 503 and "Prometheus" in answer["error"], answer
    assert took < 10  # confirm.timeout (2s) inside the notification's deadline
    assert _generation(p) == before
    assert p.reactor.metric("reactor_confirm_requests_total", result="timeout") >= 1
