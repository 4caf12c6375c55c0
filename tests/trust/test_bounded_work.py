"""Issue 12, attack 5: a notification's work is bounded in API requests and in time.

A notification naming 300 pods that do not exist used to cost ~600 API requests (a GET of a
ReplicaSet and of a Job per name, to find a vanished pod's controller). Now one LIST of the
namespace's pods answers which exist, and at most `server.maxUnknownPods` controller names are
looked up; the rest are skipped `too-many-unknown-pods`. Past `server.notificationDeadline`, what is
not decided yet is skipped `deadline-exceeded` with an honest 200 (a retry would meet the same work).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor, Ticks
from tests.trust.tenant import GHOSTS, deployed, ghost_specs

# One LIST of the namespace's pods, then a GET of a ReplicaSet and a Job for each of the default 10 names.
GHOST_REQUESTS = 1 + 2 * 10


def ghost_requests(reactor: Reactor, sim: SimCluster, count: int = GHOSTS) -> tuple[int, dict[str, Any]]:
    """(API requests, answer) of one notification naming `count` pods that do not exist."""
    sim.reset_counters()
    answer = reactor.post(notification(ghost_specs(count)))
    return sum(sim.requests.values()), answer.get_json()


def test_300_ghosts_cost_a_constant_number_of_requests(reactor: Reactor, sim: SimCluster) -> None:
    requests, body = ghost_requests(reactor, sim)
    assert requests == GHOST_REQUESTS, dict(sim.requests)
    reasons = [o["reason"] for o in body["outcomes"]]
    assert reasons.count("not-found") == 10 and reasons.count("too-many-unknown-pods") == GHOSTS - 10
    assert reactor.metric("reactor_alerts_skipped_total", reason="too-many-unknown-pods") == GHOSTS - 10


def test_the_cost_does_not_grow_with_the_ghosts(reactor: Reactor, sim: SimCluster) -> None:
    assert ghost_requests(reactor, sim, 1000)[0] == GHOST_REQUESTS


def test_ghosts_do_not_crowd_out_a_real_alert(reactor: Reactor, sim: SimCluster) -> None:
    pod = reactor.pods("trainer")[0]
    specs = [*ghost_specs(), AlertSpec("GPUSaturated", NAMESPACE, pod, "trainer", 0.99, 2)]
    outcomes = {o["pod"]: o for o in reactor.post(notification(specs)).get_json()["outcomes"]}
    assert outcomes[pod]["result"] == "applied", outcomes[pod]


def test_vanished_pods_of_one_replicaset_share_one_lookup(reactor: Reactor, sim: SimCluster) -> None:
    """The revert after a rollout names the replaced pods: all of them came from one ReplicaSet, and the
    limit counts controller names, not pods — 30 vanished pods of it all resolve to their Deployment."""
    (rs,) = [r["metadata"]["name"] for r in sim.list("replicasets", NAMESPACE)
             if r["metadata"]["name"].startswith("llm-inference-")]
    specs = [AlertSpec("GPUSaturated", NAMESPACE, f"{rs}-gone{i:02d}", "server", 0.99, 4) for i in range(30)]
    outcomes = reactor.post(notification(specs)).get_json()["outcomes"]
    assert {(o["workload"], o.get("reason")) for o in outcomes} == {(f"Deployment/{NAMESPACE}/llm-inference", None)}
    assert {o["result"] for o in outcomes} == {"applied"}


@pytest.fixture
def slow_writes(sim: SimCluster, token_file: Path) -> Iterator[tuple[Reactor, Ticks[float]]]:
    """The reactor whose monotonic clock moves 10 s on every write: the first write spends the deadline."""
    with deployed(sim, token_file, server={"tokenFile": str(token_file), "notificationDeadline": "8s"}) as r:
        clock = Ticks(0.0)
        r.service.engine.readers.monotonic = clock
        real = r.service.kube.patch

        def patch(*args: Any, **kw: Any) -> Any:
            clock.now += 10
            return real(*args, **kw)

        r.service.kube.patch = patch  # type: ignore[method-assign]
        yield r, clock


def test_past_the_deadline_the_rest_is_skipped_with_a_200(slow_writes: tuple[Reactor, Ticks[float]],
                                                          sim: SimCluster) -> None:
    reactor, _ = slow_writes
    deployment, statefulset = reactor.pods("llm-inference")[0], reactor.pods("trainer")[0]
    answer = reactor.post(notification([AlertSpec("GPUSaturated", NAMESPACE, deployment, "server", 0.99, 4),
                                        AlertSpec("GPUSaturated", NAMESPACE, statefulset, "trainer", 0.99, 2)]))
    assert answer.status_code == 200
    outcomes = {o["pod"]: o for o in answer.get_json()["outcomes"]}
    assert outcomes[deployment]["result"] == "applied"
    assert (outcomes[statefulset]["result"], outcomes[statefulset]["reason"]) == ("skipped", "deadline-exceeded")
    assert sim.get("statefulsets", NAMESPACE, "trainer")["metadata"]["generation"] == 1
    assert reactor.metric("reactor_workload_skips_total", reason="deadline-exceeded") == 1
