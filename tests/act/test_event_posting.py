"""Events off the request path (issue 21): queued and sent by a background thread as kopf does
(kopf/_core/engines/posting.py), bounded, drained on close; repeats counted on the first Event and similar ones
combined, as client-go's EventCorrelator does (tools/record/events_cache.go)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.act.posting import COMBINED, Correlator, EventPoster, workload_event
from reactor.cluster.kube import KubeGateway
from reactor.core.model import WorkloadRef
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.observe.test_verification import _cluster
from tests.support import NAMESPACE, build_reactor, kube_gateway, make_settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REF = WorkloadRef("Deployment", NAMESPACE, "trainer")
OBJ = {"apiVersion": "apps/v1", "metadata": {"uid": "u-1", "resourceVersion": "7"}}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with build.start(build.namespace(), settle=False) as cluster:
        yield cluster


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    with kube_gateway(sim) as gateway:
        yield gateway


def _event(message: str, seconds: int = 0, reason: str = "RolloutStalled") -> dict[str, Any]:
    return workload_event(REF, OBJ, reason=reason, message=message, now=T0 + timedelta(seconds=seconds),
                          warning=True)


def _ours(sim: SimCluster) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", NAMESPACE) if (e.get("source") or {}).get("component") == "gpu-reactor"]


def test_the_same_event_again_is_counted_on_the_first(sim: SimCluster, kube: KubeGateway) -> None:
    """client-go eventLogger.eventObserve: same source, object, type, reason and message → PATCH count + 1 and
    lastTimestamp on the Event first created; firstTimestamp and name stay."""
    poster = EventPoster(kube)
    for seconds in (0, 10, 20):
        assert poster.send(_event("stalled", seconds))
    (event,) = _ours(sim)
    assert (event["count"], event["lastTimestamp"]) == (3, "2026-03-01T12:00:20Z")
    assert event["firstTimestamp"].startswith("2026-03-01T12:00:00")
    assert sim.requests[("create", "events", "")] == 1 and sim.requests[("patch", "events", "")] == 2
    assert poster.send(_event("another message", 30))
    assert sorted(e["count"] for e in _ours(sim)) == [1, 3]


def test_a_repeat_of_an_event_deleted_since_is_created_anew(sim: SimCluster, kube: KubeGateway) -> None:
    """An Event's TTL ran out between two repeats: the patch meets a 404, the repeat is created again."""
    poster = EventPoster(kube)
    assert poster.send(_event("stalled"))
    (event,) = _ours(sim)
    sim.delete("events", NAMESPACE, event["metadata"]["name"])
    assert poster.send(_event("stalled", 5))
    (again,) = _ours(sim)
    assert again["metadata"]["name"] != event["metadata"]["name"] and again["count"] == 1


def test_similar_events_past_the_threshold_are_combined() -> None:
    """client-go EventAggregator: the 10th Event of one object and reason with a different message within 10 minutes
    becomes "(combined from similar events): …", itself counted on from then on."""
    correlator = Correlator(max_events=10, interval=600, clock=lambda: 0.0)
    keys = set()
    for i in range(9):
        body, key, repeat = correlator.correlate(_event(f"message {i}"))
        assert repeat is None and not body["message"].startswith(COMBINED)
        correlator.sent(key, {**body, "metadata": {"name": f"e{i}"}, "count": 1})
        keys.add(key)
    body, key, repeat = correlator.correlate(_event("message 9"))
    assert body["message"] == COMBINED + "message 9" and repeat is None and key not in keys
    correlator.sent(key, {**body, "metadata": {"name": "combined"}, "count": 1})
    body, _, repeat = correlator.correlate(_event("message 10"))
    assert repeat is not None and (repeat.name, repeat.count) == ("combined", 2)


class _Slow:
    """An Events API that answers after `delay` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay, self.created = delay, 0
        self.started = threading.Event()

    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        time.sleep(self.delay)
        self.created += 1
        return {**body, "metadata": {"name": f"e{self.created}"}}

    def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("no repeats here")


def test_the_queue_is_bounded_and_a_full_one_drops_without_waiting() -> None:
    dropped: list[int] = []
    sink = _Slow(0.5)
    poster = EventPoster(sink, size=2, dropped=lambda: dropped.append(1))
    assert poster.post(_event("a"))
    assert sink.started.wait(5)  # the thread holds "a"; two more fill the queue
    started = time.monotonic()
    assert poster.post(_event("b")) and poster.post(_event("c"))
    assert not poster.post(_event("d"))
    assert time.monotonic() - started < 0.2
    assert dropped == [1]
    poster.close(timeout=5)
    assert sink.created == 3  # a, b and c: what was queued is sent on close
    assert not poster.post(_event("e"))  # closed: nothing more is taken


def test_a_stalled_event_api_does_not_delay_the_webhooks_answer(token_file: Path) -> None:
    """The Events API hangs (sim fault injection, 3 s per request): the webhook still answers the applied change
    at once, and the Event is posted afterwards by the background thread."""
    sim = _cluster(8)
    try:
        settings = make_settings(token_file, alerts={"GPUSaturated": ["resize-gpu-up"]}, cooldown="0s",
                                 kube={"timeout": "5s", "qps": 1000, "burst": 1000})
        r = build_reactor(sim, settings)
        sim.inject_fault(verb="create", resource="events", mode="timeout", delay=3.0, count=1)
        started = time.monotonic()
        answer = r.client.post("/alerts", json=r.alerts("GPUSaturated", "trainer", "main", value=0.98),
                               headers={"Authorization": f"Bearer {_token(token_file)}"})
        took = time.monotonic() - started
        assert answer.status_code == 200
        assert {o["result"] for o in answer.get_json()["outcomes"]} == {"applied"}
        assert took < 2.0, f"the answer waited {took:.1f}s on the Events API"
        assert not [e for e in _ours(sim) if e["reason"] == "GPUResized"]  # not yet: its request hangs
        assert r.service.events.flush(timeout=30)
        assert [e["reason"] for e in _ours(sim)] == ["GPUResized"]
        r.service.events.close()
        r.service.kube.close()
    finally:
        sim.stop()


def _token(path: Path) -> str:
    return path.read_text().strip()
