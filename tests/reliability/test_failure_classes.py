"""The two classes of failure (reactor/core/errors.py, `classify`), over HTTP against the embedded cluster.

What a retry can fix — the API server's 5xx and 429, timeouts, dropped connections, a 409 anywhere but the
conditional write (and conflicts beyond the act step's budget there), on every verb the reactor sends while
resolving and deciding (get, list, patch) — makes the notification a 503, so Alertmanager delivers it again
(notify/util.go, `Retrier.Check`: a 5xx is retried, a 2xx or 4xx never), and the 503's outcomes say which alerts
failed and why. The other workloads of the notification are handled all the same, and the redelivery finishes the
rest: one change per workload in the end.

What a retry cannot fix — the workload's own data, a bug it meets — fails that workload's alerts alone
(`failed`/`internal-error`, answered 200: a retry would meet the same data), never the notification.

The Event and the verifier's Lease are written after the change: their failures are logged and answered 200 with
the change applied, since a redelivery would find the firing applied and write neither again.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

import reactor.cluster.kinds as kinds_module
import reactor.engine.notifications as engine_module
from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import (
    Answer,
    Child,
    alerts_for,
    assert_whole,
    body_of,
    deliver,
    deployment_doc,
    missing_outcomes,
    namespace_docs,
    reactor_events,
    seed,
    serving,
    state,
)
from tests.support import TOKEN, build_reactor, make_settings

RETRIES = 3  # the gateway's bounded retries per request: 4 attempts
POLICY = {"namespaces": {"allow": ["*"]}, "kube": {"timeout": "1s", "qps": 1000, "burst": 1000},
          "budget": {"global": {"actions": 10_000, "per": "10m"}, "namespace": {"actions": 10, "per": "10m"}}}
LEASE_NS = "gpu-reactor"  # verify.leaseNamespace's default: the verifier's Lease lives there
_names = (f"classes-{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Child]]:
    with serving("classes", tmp_path_factory.mktemp("classes"), POLICY, namespace_docs(LEASE_NS)) as served:
        yield served


@pytest.fixture
def sim(world: tuple[SimCluster, Child]) -> Iterator[SimCluster]:
    try:
        yield world[0]
    finally:
        world[0].clear_faults()


@pytest.fixture
def child(world: tuple[SimCluster, Child]) -> Child:
    return world[1]


def fresh(sim: SimCluster, apps: tuple[str, ...] = ("web",)) -> tuple[str, dict[str, Any]]:
    """A new namespace (its pods never resolved before: the pod GET is sent) with a Deployment per app."""
    ns = next(_names)
    seed(sim, namespace_docs(ns) + [deployment_doc(ns, a) for a in apps])
    body = body_of(alerts_for(sim, ns, list(apps)))
    sim.reset_counters()
    return ns, body


def changes(sim: SimCluster, ns: str, app: str) -> int:
    s = state(sim, "deployments", ns, app)
    assert_whole(s, original=4, where=f"{ns}/{app}")
    return s.changes


def record(scenario: str, sim: SimCluster, ns: str, body: dict[str, Any], answers: list[Answer], *, faults: int,
           apps: tuple[str, ...] = ("web",), expected: int | None = None) -> None:
    made = [changes(sim, ns, a) for a in apps]
    FIGURES.add(scenario, deliveries=len(answers), duplicates=len(answers) - 1, faults=faults, applied=sum(made),
                expected=len(apps) if expected is None else expected, double=sum(max(0, c - 1) for c in made),
                lost=sum(missing_outcomes(body, a) for a in answers) + (made.count(0) if expected is None else 0),
                answers_503=sum(1 for a in answers if a.status == 503))


def by_pod(answer: Answer) -> dict[str, tuple[str, str | None, str]]:
    """Each alert's (result, reason, detail), by the app its pod belongs to."""
    return {o["pod"].split("-")[0]: (o["result"], o.get("reason"), o.get("detail", "")) for o in answer.outcomes}


def assert_retry_answer(answer: Answer, body: dict[str, Any], failed: set[str]) -> None:
    """A 503 that says a retry is due, with an outcome for every alert; the `failed` apps' say why."""
    assert answer.status == 503, answer.body
    assert answer.body["retry"] is True and answer.body["error"].startswith("temporary failure, retry:")
    assert [o["fingerprint"] for o in answer.outcomes] == [a["fingerprint"] for a in body["alerts"]], answer.body
    for app, (result, reason, detail) in by_pod(answer).items():
        if app in failed:
            assert (result, reason) == ("failed", "api-error"), (app, answer.body)
            assert detail.startswith("temporary failure, the notification is answered 503"), detail


# --- what a retry can fix: a 503, then the redelivery completes ------------------------------------------------

# (verb, resource, fault, count): every verb the reactor sends while resolving (the pod, its ReplicaSet, the
# Deployment) and deciding (the namespace's LimitRanges and ResourceQuotas, the re-read after a conflict) and acting.
RETRYABLE = [
    ("get", "pods", dict(status=409), 1),  # issue 22: a 409 on a pod GET was an internal-error, the alert lost
    ("get", "pods", dict(status=500), RETRIES + 1),
    ("get", "pods", dict(mode="drop"), RETRIES + 1),
    ("get", "replicasets", dict(status=409), 1),
    ("get", "replicasets", dict(status=429), RETRIES + 1),
    ("get", "deployments", dict(status=409), 1),
    ("get", "deployments", dict(status=503), RETRIES + 1),
    ("list", "limitranges", dict(status=409), 1),
    ("list", "limitranges", dict(mode="drop"), RETRIES + 1),
    ("list", "resourcequotas", dict(status=500), RETRIES + 1),
    ("list", "resourcequotas", dict(status=429, retry_after=0), RETRIES + 1),
    ("patch", "deployments", dict(status=503), RETRIES + 1),
    ("patch", "deployments", dict(status=409), RETRIES + 1),  # conflicts beyond the budget: kept changing
]


@pytest.mark.parametrize(("verb", "resource", "fault", "count"), RETRYABLE,
                         ids=[f"{v}-{r}-{f.get('status') or f.get('mode')}" for v, r, f, _ in RETRYABLE])
def test_a_failure_a_retry_can_fix_is_a_503_then_the_redelivery_applies_once(
        sim: SimCluster, child: Child, verb: str, resource: str, fault: dict[str, Any], count: int) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb=verb, resource=resource, count=count, **fault)
    first = child.post(body)
    assert_retry_answer(first, body, failed={"web"})
    assert changes(sim, ns, "web") == 0 and reactor_events(sim, ns, "web") == 0
    again = deliver(child, body)
    record(f"class retry {verb} {resource}", sim, ns, body, [first, *again], faults=count)
    assert [a.status for a in again] == [200] and again[0].reasons() == {("applied", None)}, again[0].body
    assert changes(sim, ns, "web") == 1
    assert child.post(body).reasons() == {("skipped", "already-applied")}


def test_a_retryable_failure_on_one_workload_does_not_hold_back_the_other(sim: SimCluster, child: Child) -> None:
    """The first pod GET meets a 409: the other workload is changed in the same delivery, the 503 says which one
    failed, and the redelivery changes that one and finds the other already applied."""
    apps = ("web", "api")
    ns, body = fresh(sim, apps)
    sim.inject_fault(verb="get", resource="pods", status=409, count=1)
    first = child.post(body)
    failed = {app for app, o in by_pod(first).items() if o[0] == "failed"}
    assert len(failed) == 1, first.body
    (other,) = set(apps) - failed
    assert_retry_answer(first, body, failed=failed)
    assert by_pod(first)[other][:2] == ("applied", None)
    assert {a: changes(sim, ns, a) for a in apps} == {**dict.fromkeys(failed, 0), other: 1}
    again = deliver(child, body)
    record("class retry one of two", sim, ns, body, [first, *again], faults=1, apps=apps)
    assert [a.status for a in again] == [200]
    assert {app: o[:2] for app, o in by_pod(again[0]).items()} == {**dict.fromkeys(failed, ("applied", None)),
                                                                   other: ("skipped", "already-applied")}
    assert {a: changes(sim, ns, a) for a in apps} == dict.fromkeys(apps, 1)


@pytest.mark.parametrize("fault", [dict(status=409), dict(status=500)], ids=["409", "500"])
def test_a_failed_pod_list_fails_its_namespace_alike_then_the_redelivery_applies_each_once(
        sim: SimCluster, child: Child, fault: dict[str, Any]) -> None:
    """Five pods of one namespace are read with one LIST (resolve.owners.LIST_PODS_ABOVE): when it fails, each of
    their alerts is `failed` saying a retry is due, without one GET per pod against a failing API server."""
    apps = ("a0", "a1", "a2", "a3", "a4")
    ns, body = fresh(sim, apps)
    count = 1 if fault["status"] == 409 else RETRIES + 1
    sim.inject_fault(verb="list", resource="pods", count=count, **fault)
    first = child.post(body)
    assert_retry_answer(first, body, failed=set(apps))
    assert sim.requests.get(("get", "pods", ""), 0) == 0, sim.requests
    again = deliver(child, body)
    record("class retry list pods", sim, ns, body, [first, *again], faults=count, apps=apps)
    assert [a.status for a in again] == [200] and again[0].reasons() == {("applied", None)}, again[0].body
    assert {a: changes(sim, ns, a) for a in apps} == dict.fromkeys(apps, 1)


# --- written after the change: the change stands, answered 200 ---------------------------------------------------

@pytest.mark.parametrize(("verb", "resource"), [("create", "events"), (None, "leases")])
def test_a_failed_event_or_lease_write_leaves_the_change_applied_and_answered(
        sim: SimCluster, child: Child, verb: str | None, resource: str) -> None:
    ns, body = fresh(sim)
    faults = 100  # more than every attempt the notification (and the verifier's passes meanwhile) makes
    sim.inject_fault(verb=verb, resource=resource, status=500, count=faults)
    answer = child.post(body)

    def sent_now() -> int:
        return sum(n for (v, r, _), n in sim.requests.items() if r == resource and verb in (None, v))

    # Events are posted off the request path (act/posting.py): their tries may still be going on after the answer.
    deadline = time.monotonic() + 20
    while sent_now() < RETRIES + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    sent = sent_now()
    sim.clear_faults()
    record(f"class after-change {resource}", sim, ns, body, [answer], faults=min(faults, sent))
    assert answer.status == 200 and answer.reasons() == {("applied", None)}, answer.body
    assert sent >= RETRIES + 1, sim.requests
    assert changes(sim, ns, "web") == 1
    assert child.post(body).reasons() == {("skipped", "already-applied")}


# --- what a retry cannot fix: that workload fails, the others go on, answered 200 -------------------------------

class Served:
    """The reactor assembled in this process and served over HTTP on a free port (werkzeug), so a test can poison
    one workload's data as it is read (a `reactor serve` child cannot be reached into)."""

    def __init__(self, sim: SimCluster, workdir: Path) -> None:
        (workdir / "token").write_text(TOKEN)
        self.reactor = build_reactor(sim, make_settings(workdir / "token", **POLICY))
        self.reactor.service.app.testing = False  # an exception that leaves the handler is a 500, as in production
        self._server = make_server("127.0.0.1", 0, self.reactor.service.app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def post(self, body: dict[str, Any]) -> Answer:
        if self.reactor.prometheus is not None:  # genuine alerts: the rules fire what is posted (the confirm step)
            self.reactor.prometheus.observe(body)
        conn = http.client.HTTPConnection("127.0.0.1", self._server.server_port, timeout=30)
        try:
            conn.request("POST", "/alerts", json.dumps(body),
                         {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
            response = conn.getresponse()
            return Answer(response.status, json.loads(response.read() or b"{}"), 0.0)
        finally:
            conn.close()

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self.reactor.service.kube.close()


@pytest.fixture
def served(sim: SimCluster, tmp_path: Path) -> Iterator[Served]:
    with contextlib.closing(Served(sim, tmp_path)) as server:
        yield server


def poison(monkeypatch: pytest.MonkeyPatch, where: str, app: str) -> None:
    """`app`'s data, as the reactor reads it, holds a value nobody foresaw: reading it raises (a TypeError here)."""
    # Deciding reads the workload through the one cluster view (engine and verifier alike), a built-in kind by kinds.py.
    module, name = {"resolve": (engine_module, "resolve_owner"), "decide": (kinds_module, "to_workload")}[where]
    real = getattr(module, name)

    def poisoned(*args: Any, **kw: Any) -> Any:
        named = [a for a in args if isinstance(a, (str, dict))]
        pod_or_obj = named[-1] if where == "resolve" else args[0]
        text = pod_or_obj if isinstance(pod_or_obj, str) else (pod_or_obj.get("metadata") or {}).get("name", "")
        if text.startswith(app):
            raise TypeError(f"{app}: a field of an unforeseen type")
        return real(*args, **kw)

    monkeypatch.setattr(module, name, poisoned)


@pytest.mark.parametrize("where", ["resolve", "decide"])
def test_a_workload_whose_own_data_fails_is_its_own_internal_error_never_a_503(
        sim: SimCluster, served: Served, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    ns, body = fresh(sim, ("bad", "good"))
    poison(monkeypatch, where, "bad")
    answers = [served.post(body), served.post(body)]  # as Alertmanager re-sends the group: the same answer
    record(f"class internal {where}", sim, ns, body, answers, faults=0, apps=("good",))
    first, again = answers
    assert first.status == 200, first.body
    assert by_pod(first)["bad"][:2] == ("failed", "internal-error")
    assert "TypeError" in by_pod(first)["bad"][2]
    assert by_pod(first)["good"][:2] == ("applied", None)
    assert again.status == 200 and by_pod(again)["bad"][:2] == ("failed", "internal-error")
    assert (changes(sim, ns, "bad"), changes(sim, ns, "good")) == (0, 1)


def test_both_classes_in_one_notification(sim: SimCluster, served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bad`'s data fails it, `good`'s write meets 503s: the answer is a 503 (for `good`), `bad` is internal-error in
    it and in the redelivery, which applies `good` — the poisoned workload never blocks it, nor hides its retry."""
    ns, body = fresh(sim, ("bad", "good"))
    poison(monkeypatch, "decide", "bad")
    # More faults than `good`'s tries: the module's reactor child may patch a deployment of an earlier test (its
    # verified mark) meanwhile and take one; they are cleared once the first answer is in.
    sim.inject_fault(verb="patch", resource="deployments", status=503, count=10 * (RETRIES + 1))
    first = served.post(body)
    sim.clear_faults()
    assert_retry_answer(first, body, failed={"good"})
    assert by_pod(first)["bad"][:2] == ("failed", "internal-error")
    again = served.post(body)
    record("class both", sim, ns, body, [first, again], faults=RETRIES + 1, apps=("good",))
    assert again.status == 200, again.body
    assert {app: o[:2] for app, o in by_pod(again).items()} == {"bad": ("failed", "internal-error"),
                                                               "good": ("applied", None)}
    assert (changes(sim, ns, "bad"), changes(sim, ns, "good")) == (0, 1)
