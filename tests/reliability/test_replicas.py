"""Two replicas racing: two `reactor serve` processes get the same notifications at the same moment.

As two Alertmanagers of an HA pair would send them. There is no coordination between the replicas
but the conditional write: the loser's PATCH meets a 409, it re-reads, and finds the firing
already recorded (or the cooldown running). Many workloads at once make the race happen; the
test insists on seeing at least one 409, and counts every PATCH the cluster received.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

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
    patches,
    seed,
    state,
)

WORKLOADS = 30
ROUNDS = 3  # fresh namespaces until a race has been seen (almost always in the first)
POLICY = {"namespaces": {"allow": ["*"]}, "kube": {"qps": 1000, "burst": 1000}, "budget": {"global": {"actions": 10_000, "per": "10m"},
                                                    "namespace": {"actions": 10_000, "per": "10m"}}}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Child, Child]]:
    """One cluster, two replicas of the reactor; each test works in namespaces of its own."""
    sim = SimCluster().start()
    workdir = tmp_path_factory.mktemp("replicas")
    pair = [Child(sim, workdir, policy=POLICY, name=f"replica-{x}") for x in "ab"]
    try:
        for child in pair:
            child.start()
        yield sim, pair[0], pair[1]
    finally:
        for child in pair:
            child.kill()
            print(f"--- {child.name} log (tail) ---\n{child.log_tail()}")
        sim.stop()


def names() -> list[str]:
    return [f"w{i:02d}" for i in range(WORKLOADS)]


def race(children: list[Child], bodies: list[dict[str, Any]]) -> list[Answer]:
    """Each child gets its body at the same moment."""
    gate = threading.Barrier(len(children))
    answers: list[Answer | None] = [None] * len(children)

    def send(i: int) -> None:
        gate.wait(timeout=10)
        answers[i] = children[i].post(bodies[i], timeout=60)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(children))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert all(a is not None for a in answers)
    return answers  # type: ignore[return-value]


def conflicts(children: list[Child]) -> int:
    return int(sum(c.metric("reactor_kube_requests_total", verb="patch", code="409") for c in children))


def test_two_replicas_on_the_same_notifications_act_once(replicas: tuple[SimCluster, Child, Child]) -> None:
    cluster, a, b = replicas
    raced = 0
    for round_ in range(ROUNDS):
        ns = f"ha-{round_}"
        seed(cluster, namespace_docs(ns) + [deployment_doc(ns, n) for n in names()])
        body = body_of(alerts_for(cluster, ns, names()))
        before_409, before_patches = conflicts([a, b]), patches(cluster, "deployments")
        answers = race([a, b], [body, body])
        raced_now = conflicts([a, b]) - before_409
        changes = [state(cluster, "deployments", ns, n).changes for n in names()]
        FIGURES.add("replicas same notification", deliveries=2, duplicates=1, applied=sum(changes), expected=WORKLOADS,
                    double=sum(max(0, c - 1) for c in changes), lost=sum(missing_outcomes(body, x) for x in answers)
                    + changes.count(0))
        assert [x.status for x in answers] == [200, 200], [x.body for x in answers]
        assert changes == [1] * WORKLOADS
        for n in names():
            assert_whole(state(cluster, "deployments", ns, n), original=4, where=f"{ns}/{n}")
        # Each alert applied by exactly one replica; the other found it done.
        for i in range(len(body["alerts"])):
            results = sorted((x.outcomes[i]["result"], x.outcomes[i].get("reason")) for x in answers)
            assert results == [("applied", None), ("skipped", "already-applied")], results
        # Every PATCH the cluster saw either applied an action or was a loser's 409.
        assert patches(cluster, "deployments") - before_patches == WORKLOADS + raced_now
        raced += raced_now
        if raced:
            break
    assert raced > 0, "the replicas never raced: no 409 in either replica's reactor_kube_requests_total"


def test_two_replicas_with_different_firings_of_one_workload_act_once(replicas: tuple[SimCluster, Child, Child]) -> None:
    """Different firings (different startsAt) raced: the winner's cooldown stops the other after its 409."""
    cluster, a, b = replicas
    before_409, before_patches = conflicts([a, b]), patches(cluster, "deployments")
    ns = "ha-firings"
    seed(cluster, namespace_docs(ns) + [deployment_doc(ns, n) for n in names()])
    start = datetime.now(UTC) - timedelta(minutes=5)
    bodies = [body_of(AlertSpec(s.name, s.namespace, s.pod, s.container, starts_at=start + timedelta(seconds=k))
                      for s in alerts_for(cluster, ns, names())) for k in (0, 1)]
    answers = race([a, b], bodies)
    changes = [state(cluster, "deployments", ns, n).changes for n in names()]
    FIGURES.add("replicas different firings", deliveries=2, applied=sum(changes), expected=WORKLOADS,
                double=sum(max(0, c - 1) for c in changes),
                lost=sum(missing_outcomes(bd, x) for bd, x in zip(bodies, answers)) + changes.count(0))
    assert [x.status for x in answers] == [200, 200]
    assert changes == [1] * WORKLOADS
    for i in range(WORKLOADS):
        results = sorted((x.outcomes[i]["result"], x.outcomes[i].get("reason")) for x in answers)
        assert results == [("applied", None), ("skipped", "cooldown")], results
    assert patches(cluster, "deployments") - before_patches == WORKLOADS + conflicts([a, b]) - before_409
