"""API faults on reads and writes: 500/503, 429 with and without Retry-After, 409, hangs, dropped
connections, and an answer lost after the write was applied.

The promises: a fault that outlasts the bounded retries is a 503 (Alertmanager retries); retries
inside one request wait as Retry-After says and go through the client rate limit; the GPU change
and its annotations are one patch, so after any fault both or neither are there; when the faults
clear, the redelivered notification completes — with still one action per workload.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec
from reactor_sim import SimCluster
from tests.reliability.conftest import LONG, long_only
from tests.reliability.figures import FIGURES
from tests.reliability.harness import (
    COOLDOWN_UNTIL,
    Answer,
    Child,
    LossyProxy,
    alerts_for,
    assert_whole,
    body_of,
    deliver,
    deployment_doc,
    missing_outcomes,
    namespace_docs,
    patches,
    reactor_events,
    seed,
    serving,
    state,
    statefulset_doc,
    writes,
)

RETRIES = 3  # the gateway's bounded retries per request (KubeGateway default): 4 attempts
KUBE_TIMEOUT = 1.0
# Budget: the global window is opened wide because the tests share one process; every test has
# its own namespace, whose window allows 2 actions (no test needs more).
NAMESPACE_BUDGET = 2
POLICY = {"namespaces": {"allow": ["*"]}, "kube": {"timeout": "1s", "qps": 1000, "burst": 1000},
          "budget": {"global": {"actions": 10_000, "per": "10m"}, "namespace": {"actions": NAMESPACE_BUDGET, "per": "10m"}}}
_names = (f"faults-{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Child]]:
    with serving("faults", tmp_path_factory.mktemp("faults"), POLICY) as served:
        yield served


@pytest.fixture
def sim(world: tuple[SimCluster, Child]) -> Iterator[SimCluster]:
    cluster = world[0]
    try:
        yield cluster
    finally:
        cluster.clear_faults()


@pytest.fixture
def child(world: tuple[SimCluster, Child]) -> Child:
    return world[1]


def fresh(sim: SimCluster, *, statefulset: bool = False) -> tuple[str, dict[str, Any]]:
    """A new namespace with Deployment `web` (and StatefulSet `db`), and the notification about them."""
    ns = next(_names)
    docs = namespace_docs(ns) + [deployment_doc(ns, "web")] + ([statefulset_doc(ns, "db")] if statefulset else [])
    seed(sim, docs)
    body = body_of(alerts_for(sim, ns, ["web", "db"] if statefulset else ["web"]))
    sim.reset_counters()
    return ns, body


def record(scenario: str, sim: SimCluster, ns: str, body: dict[str, Any], answers: list[Answer], *, faults: int,
           workloads: tuple[tuple[str, str], ...] = (("deployments", "web"),)) -> None:
    changes = [state(sim, res, ns, name).changes for res, name in workloads]
    FIGURES.add(scenario, deliveries=len(answers), duplicates=len(answers) - 1, faults=faults, applied=sum(changes),
                expected=len(workloads), double=sum(max(0, c - 1) for c in changes),
                lost=sum(missing_outcomes(body, a) for a in answers) + changes.count(0),
                answers_503=sum(1 for a in answers if a.status == 503))


def untouched(sim: SimCluster, ns: str, name: str = "web", resource: str = "deployments") -> None:
    s = state(sim, resource, ns, name)
    assert_whole(s, original=4, where=f"{ns}/{name}")
    assert (s.changes, s.gpus, s.last_action) == (0, "4", None)


def applied_once(sim: SimCluster, ns: str, name: str = "web", resource: str = "deployments") -> None:
    s = state(sim, resource, ns, name)
    assert_whole(s, original=4, where=f"{ns}/{name}")
    assert (s.changes, s.gpus) == (1, "3"), f"{ns}/{name}: {s.changes} changes, {s.gpus} GPUs"


# Each fault mode on reads; hangs cost 4 × the client timeout, so the short form hangs writes only.
FAULT_MODES = {
    "500": dict(status=500), "503": dict(status=503), "429": dict(status=429),
    "timeout": dict(mode="timeout", delay=KUBE_TIMEOUT + 1), "drop": dict(mode="drop"),
}


@pytest.mark.parametrize("mode", [m if m != "timeout" else pytest.param(m, marks=long_only) for m in FAULT_MODES])
def test_read_fault_outlasting_the_retries_is_a_503_then_the_redelivery_completes(sim: SimCluster, child: Child, mode: str) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="get", resource="replicasets", count=RETRIES + 1, **FAULT_MODES[mode])
    first = child.post(body)
    assert first.status == 503, first.body
    assert first.body["error"].startswith("temporary failure, retry:")
    assert sim.requests[("get", "replicasets", "")] == RETRIES + 1
    assert writes(sim) == 0
    untouched(sim, ns)
    again = deliver(child, body)
    record(f"fault read {mode}", sim, ns, body, [first, *again], faults=RETRIES + 1)
    assert [a.status for a in again] == [200] and again[0].reasons() == {("applied", None)}
    applied_once(sim, ns)
    assert child.post(body).reasons() == {("skipped", "already-applied")}


def test_read_fault_within_the_retries_is_absorbed_in_the_same_request(sim: SimCluster, child: Child) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="get", resource="replicasets", status=500, count=RETRIES)
    answer = child.post(body)
    record("fault read absorbed", sim, ns, body, [answer], faults=RETRIES)
    assert answer.status == 200 and answer.reasons() == {("applied", None)}
    assert sim.requests[("get", "replicasets", "")] == RETRIES + 1
    applied_once(sim, ns)


@pytest.mark.parametrize("mode", ["500", "drop", pytest.param("timeout", marks=long_only)])
def test_write_fault_leaves_nothing_half_written(sim: SimCluster, child: Child, mode: str) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", count=RETRIES + 1, **FAULT_MODES[mode])
    first = child.post(body)
    assert first.status == 503, first.body
    assert patches(sim, "deployments") == RETRIES + 1
    untouched(sim, ns)  # neither the GPU change nor its annotations
    assert reactor_events(sim, ns, "web") == 0
    again = deliver(child, body)
    record(f"fault write {mode}", sim, ns, body, [first, *again], faults=RETRIES + 1)
    assert [a.status for a in again] == [200] and again[0].reasons() == {("applied", None)}
    assert patches(sim, "deployments") == RETRIES + 2
    applied_once(sim, ns)
    assert reactor_events(sim, ns, "web", expect=1) == 1


def test_a_write_that_hangs_once_is_retried_and_applied_once(sim: SimCluster, child: Child) -> None:
    """The client gives up on a hung PATCH after its timeout (1 s) and sends it again."""
    ns, body = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", count=1, **FAULT_MODES["timeout"])
    answer = child.post(body)
    record("fault write timeout", sim, ns, body, [answer], faults=1)
    assert answer.status == 200 and answer.reasons() == {("applied", None)}, answer.body
    assert KUBE_TIMEOUT <= answer.seconds < KUBE_TIMEOUT + 1.5
    assert patches(sim, "deployments") == 2
    applied_once(sim, ns)


def test_one_failing_workload_does_not_hold_back_the_other(sim: SimCluster, child: Child) -> None:
    """The StatefulSet's writes fail: the Deployment is changed, the answer is 503, the retry finishes the rest."""
    ns, body = fresh(sim, statefulset=True)
    sim.inject_fault(verb="patch", resource="statefulsets", status=500, count=RETRIES + 1)
    first = child.post(body)
    assert first.status == 503 and "StatefulSet/" in first.body["error"]
    applied_once(sim, ns)
    untouched(sim, ns, "db", "statefulsets")
    again = deliver(child, body)
    record("fault one of two", sim, ns, body, [first, *again], faults=RETRIES + 1,
           workloads=(("deployments", "web"), ("statefulsets", "db")))
    assert [a.status for a in again] == [200]
    by_app = {(o["pod"].split("-")[0], o["result"], o.get("reason")) for o in again[0].outcomes}
    assert by_app == {("web", "skipped", "already-applied"), ("db", "applied", None)}
    applied_once(sim, ns)
    applied_once(sim, ns, "db", "statefulsets")


def test_retry_after_is_waited_for(sim: SimCluster, child: Child) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", status=429, retry_after=1, count=2)
    answer = child.post(body)
    assert answer.status == 200 and answer.reasons() == {("applied", None)}
    assert 2.0 <= answer.seconds < 3.5, f"two Retry-After: 1 waits took {answer.seconds:.2f} s"
    assert patches(sim, "deployments") == 3
    applied_once(sim, ns)
    # Without Retry-After the gateway backs off briefly (0.1 s, 0.2 s): the header above was what slowed it.
    ns2, body2 = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", status=429, count=2)
    quick = child.post(body2)
    assert quick.status == 200 and quick.seconds < 1.5, quick.seconds
    applied_once(sim, ns2)
    record("fault 429 retry-after", sim, ns, body, [answer], faults=2)
    record("fault 429 retry-after", sim, ns2, body2, [quick], faults=2)


def test_conflicts_are_re_read_and_a_streak_is_answered_then_redelivered(sim: SimCluster, child: Child) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", status=409, count=2)
    answer = child.post(body)
    assert answer.status == 200 and answer.reasons() == {("applied", None)}
    assert patches(sim, "deployments") == 3 and sim.requests[("get", "deployments", "")] == 3
    applied_once(sim, ns)
    record("fault 409", sim, ns, body, [answer], faults=2)
    # A workload that keeps changing: the attempts run out, nothing is written, and the answer is a 503
    # so that Alertmanager retries within seconds rather than at the next group_interval.
    ns2, body2 = fresh(sim)
    sim.inject_fault(verb="patch", resource="deployments", status=409, count=4)
    streak = child.post(body2)
    assert streak.status == 503 and "kept changing" in streak.body["error"]
    untouched(sim, ns2)
    again = child.post(body2)  # Alertmanager re-sends the group at group_interval
    assert again.reasons() == {("applied", None)}
    applied_once(sim, ns2)
    record("fault 409", sim, ns2, body2, [streak, again], faults=4)


def test_failed_writes_give_their_budget_back(sim: SimCluster, child: Child) -> None:
    """More deliveries fail on the write than the namespace budget allows actions: the next one still acts."""
    ns, body = fresh(sim)
    answers = []
    failing = NAMESPACE_BUDGET + 1
    for _ in range(failing):
        sim.inject_fault(verb="patch", resource="deployments", status=500, count=RETRIES + 1)
        answers.append(child.post(body))
    assert [a.status for a in answers] == [503] * failing
    untouched(sim, ns)
    answers.append(child.post(body))
    record("fault budget kept", sim, ns, body, answers, faults=failing * (RETRIES + 1))
    assert answers[-1].status == 200 and answers[-1].reasons() == {("applied", None)}, answers[-1].body
    applied_once(sim, ns)


def test_a_failed_event_does_not_undo_or_repeat_the_action(sim: SimCluster, child: Child) -> None:
    ns, body = fresh(sim)
    sim.inject_fault(verb="create", resource="events", status=500, count=RETRIES + 1)
    answer = child.post(body)
    record("fault event", sim, ns, body, [answer], faults=RETRIES + 1)
    assert answer.status == 200 and answer.reasons() == {("applied", None)}
    applied_once(sim, ns)
    assert reactor_events(sim, ns, "web") == 0


def test_an_answer_lost_after_the_write_does_not_repeat_it(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    """The PATCH is applied but its answer never arrives: the retry meets a 409, re-reads, finds it done."""
    ns = "lost-answer"
    seed(cluster, namespace_docs(ns) + [deployment_doc(ns, "web")])
    proxy = LossyProxy(cluster.url, lose=1)
    try:
        child = spawn(cluster, policy=POLICY, kube_url=proxy.url)
        body = body_of(alerts_for(cluster, ns, ["web"]))
        cluster.reset_counters()
        answer = child.post(body)
        assert proxy.lost == 1
        record("fault answer lost", cluster, ns, body, [answer], faults=1)
        assert answer.status == 200
        assert answer.reasons() == {("skipped", "already-applied")}, answer.body
        assert patches(cluster, "deployments") == 2
        assert child.metric("reactor_kube_requests_total", verb="patch", code="409") == 1
        applied_once(cluster, ns)
        assert child.post(body).reasons() == {("skipped", "already-applied")}
    finally:
        proxy.close()


QPS = 20


def test_retries_go_through_the_client_rate_limit(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    """qps 20, burst 1: every request, retries included, is spaced by 50 ms."""
    ns = "paced"
    apps = ["w0", "w1"]
    seed(cluster, namespace_docs(ns) + [deployment_doc(ns, a) for a in apps])
    child = spawn(cluster, policy={**POLICY, "kube": {"timeout": "1s", "qps": QPS, "burst": 1}})
    body = body_of(alerts_for(cluster, ns, apps))
    time.sleep(0.2)  # let the bucket refill after the readiness probe
    cluster.reset_counters()
    cluster.inject_fault(verb="get", resource="deployments", status=500, count=3)
    answer = child.post(body)
    sent = sum(cluster.requests.values())
    record("fault rate-limited retries", cluster, ns, body, [answer], faults=3,
           workloads=tuple(("deployments", a) for a in apps))
    assert answer.status == 200 and answer.reasons() == {("applied", None)}
    assert sent >= len(apps) * 5 + 3, cluster.requests
    # The burst of 1 is free; every further request waited 1/qps, retries' backoff on top.
    assert answer.seconds >= (sent - 1) / QPS - 0.05, f"{sent} requests in {answer.seconds:.2f} s"


def wait_out_cooldown(states: list[Any]) -> None:
    """`cooldown: 0s` is written rounded up to the next second: wait for it to pass (bounded)."""
    until = max(datetime.fromisoformat(s.annotations[COOLDOWN_UNTIL].replace("Z", "+00:00")) for s in states)
    time.sleep(min(2.0, max(0.0, (until - datetime.now(UTC)).total_seconds() + 0.01)))


CHAOS_ROUNDS = 40 if LONG else 3
CHAOS_FAULTS = (
    dict(status=500), dict(status=503), dict(status=429), dict(status=409), dict(mode="drop"),
    *((dict(status=429, retry_after=1), dict(mode="timeout", delay=KUBE_TIMEOUT + 0.5)) if LONG else ()),
)
CHAOS_TARGETS = (("get", "pods"), ("get", "replicasets"), ("get", "deployments"), ("get", "statefulsets"),
                 ("list", "limitranges"), ("list", "resourcequotas"), ("list", "priorityclasses"),
                 ("patch", "deployments"), ("patch", "statefulsets"), ("create", "events"), (None, None))


def test_chaos_rounds_act_exactly_once_per_round(cluster: SimCluster, spawn: Callable[..., Child]) -> None:
    """Seeded random faults on every kind of request; each round is a new firing on every workload.

    With no cooldown, each round must shrink every workload by exactly one step, however many
    deliveries the faults cost (Alertmanager's retries are played: 503 or no answer → again).
    """
    rng = random.Random(20261130)
    ns = "chaos"
    apps = ["web", "api", "db"]
    seed(cluster, namespace_docs(ns, max_gpus=64) + [deployment_doc(ns, "web", gpus=48), deployment_doc(ns, "api", gpus=48),
                                                     statefulset_doc(ns, "db", gpus=48)])
    kinds = {"web": "deployments", "api": "deployments", "db": "statefulsets"}
    policy = {**POLICY, "cooldown": "0s", "reverseAfter": "0s", "gpus": {"min": 1, "max": 64},
              "budget": {"global": {"actions": 10_000, "per": "10m"}, "namespace": {"actions": 10_000, "per": "10m"}}}
    child = spawn(cluster, policy=policy)
    faults = 0
    for round_ in range(CHAOS_ROUNDS):
        specs = [AlertSpec("GPUUnderutilized", s.namespace, s.pod, s.container) for s in alerts_for(cluster, ns, apps)]
        body = body_of(specs)
        before = {a: state(cluster, kinds[a], ns, a) for a in apps}
        for _ in range(rng.randint(1, 3)):
            verb, resource = rng.choice(CHAOS_TARGETS)
            fault = dict(rng.choice(CHAOS_FAULTS))
            count = rng.randint(1, 5)
            cluster.inject_fault(verb=verb, resource=resource, count=count, **fault)
            faults += count
        clear = lambda attempt: cluster.clear_faults() if attempt >= 3 else None  # noqa: E731 - faults pass, as in life
        answers = deliver(child, body, tries=12, before_retry=clear)
        cluster.clear_faults()
        after = {a: state(cluster, kinds[a], ns, a) for a in apps}
        changes = {a: after[a].changes - before[a].changes for a in apps}
        FIGURES.add("chaos", deliveries=len(answers), duplicates=len(answers) - 1, applied=sum(changes.values()),
                    expected=len(apps), double=sum(max(0, c - 1) for c in changes.values()),
                    lost=sum(missing_outcomes(body, a) for a in answers) + list(changes.values()).count(0),
                    answers_503=sum(1 for a in answers if a.status == 503))
        assert answers[-1].status == 200, (round_, [a.body for a in answers])
        for a in apps:
            assert changes[a] == 1, (round_, a, changes, [x.body for x in answers])
            assert int(after[a].gpus) == int(before[a].gpus) - 1 == after[a].last_action["to"]
            assert after[a].gpus == after[a].requests
        cluster.settle()
        wait_out_cooldown([after[a] for a in apps])
    FIGURES.add("chaos", faults=faults)
