"""Duplicates: the same notification delivered again and again, and at once from 8 senders.

Alertmanager delivers at least once (retries, HA twins, repeat_interval): whatever the number
of copies, each workload is changed once, and every later copy is answered 200 `already-applied`.
The reactor is a real `reactor serve` child process; the cluster's own state is the judge.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import (
    Answer,
    Child,
    alerts_for,
    assert_whole,
    body_of,
    missing_outcomes,
    patches,
    reactor_events,
    state,
)

NS = "ml-workloads"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "cluster.yaml"
POLICY = {"namespaces": {"allow": [NS]}}
# The fixture's two workloads, their kind, GPU container, GPUs before, and after one shrink step.
WORKLOADS = (("deployments", "llm-inference", "server", 4, 3), ("statefulsets", "trainer", "trainer", 2, 1))


@pytest.fixture
def world(cluster: SimCluster, spawn: Callable[..., Child]) -> tuple[SimCluster, Child, dict[str, Any]]:
    cluster.load_manifests(FIXTURE.read_text())
    cluster.settle()
    child = spawn(cluster, policy=POLICY)
    specs = alerts_for(cluster, NS, ["llm-inference"], container="server") + alerts_for(cluster, NS, ["trainer"], container="trainer")
    cluster.reset_counters()
    return cluster, child, body_of(specs)


def check_exactly_once(sim: SimCluster, answers: list[Answer], body: dict[str, Any], scenario: str) -> None:
    """One change per workload, its record beside it, and every alert of every answer accounted for."""
    lost = sum(missing_outcomes(body, a) for a in answers)
    changes = {name: state(sim, res, NS, name, c).changes for res, name, c, _, _ in WORKLOADS}
    FIGURES.add(scenario, deliveries=len(answers), duplicates=len(answers) - 1, applied=sum(changes.values()),
                expected=len(WORKLOADS), double=sum(max(0, n - 1) for n in changes.values()),
                lost=lost + sum(1 for n in changes.values() if n == 0))
    assert [a.status for a in answers] == [200] * len(answers), [a.body for a in answers if a.status != 200]
    assert lost == 0
    for resource, name, container, before, after in WORKLOADS:
        s = state(sim, resource, NS, name, container)
        assert (s.changes, s.gpus) == (1, str(after)), f"{name}: {s.changes} changes, {s.gpus} GPUs"
        assert_whole(s, original=before, where=name)
        assert s.last_action and s.last_action["fingerprint"] in {a["fingerprint"] for a in body["alerts"]}
        assert patches(sim, resource) == 1, f"{name}: {patches(sim, resource)} PATCHes"
        assert reactor_events(sim, NS, name, expect=1) == 1


@pytest.mark.parametrize("copies", [2, 10])
def test_sequential_copies_act_once(world: tuple[SimCluster, Child, dict[str, Any]], copies: int) -> None:
    sim, child, body = world
    answers = [child.post(body) for _ in range(copies)]
    check_exactly_once(sim, answers, body, f"duplicates x{copies}")
    assert {(o["result"], o.get("action")) for o in answers[0].outcomes} == {("applied", "resize-gpu")}
    for later in answers[1:]:
        assert later.reasons() == {("skipped", "already-applied")}
    assert child.metric("reactor_actions_total", result="applied") == len(WORKLOADS)


def test_eight_concurrent_copies_act_once(world: tuple[SimCluster, Child, dict[str, Any]]) -> None:
    """Eight senders at once into one process: the threads race on the same resourceVersion."""
    sim, child, body = world
    gate = threading.Barrier(8)
    answers: list[Answer] = []
    lock = threading.Lock()

    def send() -> None:
        gate.wait(timeout=10)
        answer = child.post(body)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(answers) == 8
    check_exactly_once(sim, answers, body, "duplicates 8 threads")
    for i, alert in enumerate(body["alerts"]):
        results = sorted((a.outcomes[i]["result"], a.outcomes[i].get("reason")) for a in answers)
        assert results == [("applied", None)] + [("skipped", "already-applied")] * 7, (alert["labels"]["pod"], results)
