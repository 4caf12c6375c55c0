"""Crashes: the reactor is SIGKILLed in the middle of a notification, started again, and the
notification is redelivered (Alertmanager got no answer, so it retries).

Killed before the write lands: nothing was written, the new process acts once. Killed after the
write but before the answer: the new process finds the firing recorded in the annotations and does
not act again. Either way the cooldown, which lives in the annotations too, survives the restart.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor.tools.payloads import AlertSpec
from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import (
    Answer,
    Child,
    alerts_for,
    assert_whole,
    body_of,
    deployment_doc,
    missing_outcomes,
    namespace_docs,
    reactor_events,
    seed,
    state,
)

NS = "crash"
# The client waits long enough on a hung request for the test to kill the process while it waits. The verifier's
# first pass is 10 minutes away: the only Lease request of a test is the notification's own (see below).
POLICY = {"namespaces": {"allow": [NS]}, "kube": {"timeout": "30s", "qps": 1000, "burst": 1000},
          "verify": {"interval": "10m"}}
HANG = 20.0


def in_flight(child: Child, body: dict[str, Any]) -> tuple[threading.Thread, list[BaseException | Answer]]:
    """POST in the background; the result (an Answer or the error) lands in the list."""
    result: list[BaseException | Answer] = []

    def send() -> None:
        try:
            result.append(child.post(body, timeout=HANG + 10))
        except BaseException as e:  # noqa: BLE001 - the test inspects whatever ended the request
            result.append(e)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread, result


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def kill_during(sim: SimCluster, child: Child, body: dict[str, Any], verb: str, resource: str) -> None:
    """Hang the next `verb resource`, SIGKILL the reactor while it waits on it; no answer comes back."""
    sim.inject_fault(verb=verb, resource=resource, mode="timeout", delay=HANG, count=1)
    thread, result = in_flight(child, body)
    wait_for(lambda: sim.requests[(verb, resource, "")] >= 1, f"the {verb} {resource}")
    time.sleep(0.1)
    child.kill()
    thread.join(timeout=10)
    assert len(result) == 1 and isinstance(result[0], (OSError, http.client.HTTPException)), result
    sim.clear_faults()


def world(cluster: SimCluster) -> dict[str, Any]:
    seed(cluster, namespace_docs(NS) + [deployment_doc(NS, "web")])
    return body_of(alerts_for(cluster, NS, ["web"], starts_at=datetime.now(UTC) - timedelta(minutes=3)))


def check_cooldown_survives(cluster: SimCluster, child: Child, body: dict[str, Any]) -> Answer:
    """A new firing of the same alerts (new startsAt): refused by the cooldown read from the annotations."""
    later = [AlertSpec(a["labels"]["alertname"], NS, a["labels"]["pod"], a["labels"]["container"],
                       starts_at=datetime.now(UTC)) for a in body["alerts"]]
    refire = body_of(later)
    answer = child.post(refire)
    assert answer.status == 200 and answer.reasons() == {("skipped", "cooldown")}, answer.body
    return answer


def test_killed_before_the_write_lands_then_restarted_acts_once(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    body = world(cluster)
    first = spawn(cluster, policy=POLICY, name="before-write-1")
    kill_during(cluster, first, body, "patch", "deployments")
    s = state(cluster, "deployments", NS, "web")
    assert_whole(s, original=4, where="after the kill")
    assert (s.changes, s.last_action) == (0, None), "the hung PATCH must not have landed"
    second = spawn(cluster, policy=POLICY, name="before-write-2")
    redelivered = second.post(body)
    assert redelivered.status == 200 and redelivered.reasons() == {("applied", None)}, redelivered.body
    second.kill()
    third = spawn(cluster, policy=POLICY, name="before-write-3")  # a fresh process: an empty dedup cache
    again = third.post(body)
    assert again.reasons() == {("skipped", "already-applied")}, again.body
    cooled = check_cooldown_survives(cluster, third, body)
    s = state(cluster, "deployments", NS, "web")
    FIGURES.add("crash before write", deliveries=4, duplicates=2, faults=2, applied=s.changes, expected=1,
                double=max(0, s.changes - 1), lost=(s.changes == 0) + missing_outcomes(body, redelivered)
                + missing_outcomes(body, again) + len(body["alerts"]) - len(cooled.outcomes))
    assert (s.changes, s.gpus) == (1, "3")
    assert_whole(s, original=4, where="after the restart")
    assert reactor_events(cluster, NS, "web", expect=1) == 1


def test_killed_after_the_write_before_the_answer_does_not_act_again(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    body = world(cluster)
    first = spawn(cluster, policy=POLICY, name="after-write-1")
    # After the patch and before the answer, the notification puts its change on the verifier Lease's list (a GET
    # of the Lease first). Its Event is not on that path any more: it is queued and sent by a background thread.
    kill_during(cluster, first, body, "get", "leases")
    s = state(cluster, "deployments", NS, "web")
    assert (s.changes, s.gpus) == (1, "3"), "the PATCH landed before the kill"
    assert_whole(s, original=4, where="after the kill")
    second = spawn(cluster, policy=POLICY, name="after-write-2")
    redelivered = second.post(body)
    assert redelivered.status == 200 and redelivered.reasons() == {("skipped", "already-applied")}, redelivered.body
    cooled = check_cooldown_survives(cluster, second, body)
    s = state(cluster, "deployments", NS, "web")
    FIGURES.add("crash after write", deliveries=3, duplicates=1, faults=2, applied=s.changes, expected=1,
                double=max(0, s.changes - 1), lost=(s.changes == 0) + missing_outcomes(body, redelivered)
                + len(body["alerts"]) - len(cooled.outcomes))
    assert (s.changes, s.gpus) == (1, "3")
    # The Event was queued at the write: sent before the kill, or lost with the process; never twice.
    assert reactor_events(cluster, NS, "web") <= 1
