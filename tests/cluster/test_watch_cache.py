"""Decisions read the watch-fed cache, over real HTTP against the embedded cluster.

A notification on a cached workload reads no workload from the API (the sim's request counters say so);
a watch answered 410 lists again; a cache that is stale gives a 409 on the conditional write, and the
re-read (a GET, never the cache) decides the right change; readiness waits for the first list of
every informer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from reactor.cluster.informer import Informers
from reactor.cluster.kube import KubeGateway
from reactor.core.errors import TemporaryError
from reactor.core.metrics import Metrics
from reactor.observe import probes
from reactor_sim import SimCluster
from tests.support import HERE, NAMESPACE, Reactor, build_reactor, eventually, make_settings

GPU = "nvidia.com/gpu"
WORKLOAD_READS = {"deployments", "replicasets", "statefulsets", "jobs", "cronjobs", "limitranges",
                  "resourcequotas", "horizontalpodautoscalers", "priorityclasses"}


@pytest.fixture
def cached(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, make_settings(token_file, kube={"timeout": "2s", "qps": 1000, "burst": 1000,
                                                           "watchCache": True}))
    informers = r.service.informers
    assert informers is not None
    informers.start()
    eventually(lambda: not informers.unsynced())
    try:
        yield r
    finally:
        informers.stop(timeout=5)
        r.service.kube.close()


def informers_of(r: Reactor) -> Informers:
    assert r.service.informers is not None
    return r.service.informers


def reads(sim: SimCluster) -> dict[tuple[str, str, str], int]:
    return {k: v for k, v in sim.requests.items() if k[0] == "get" and k[1] in WORKLOAD_READS}


def gpus(sim: SimCluster) -> str:
    spec = sim.get("deployments", NAMESPACE, "llm-inference")["spec"]["template"]["spec"]
    return str(next(c for c in spec["containers"] if c["name"] == "server")["resources"]["limits"][GPU])


def test_a_notification_on_a_cached_workload_reads_no_workload(cached: Reactor) -> None:
    body = cached.alerts("GPUUnderutilized", "llm-inference", "server")
    cached.sim.reset_counters()
    outcomes = cached.post(body).get_json()["outcomes"]
    assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("applied", 4, 3)}
    assert reads(cached.sim) == {}, "Deployment, ReplicaSet, quotas and limits come from the cache"
    # Ownership checks the pod itself; the verifier reads its Lease to list the change it will follow.
    assert {k[1] for k in cached.sim.requests if k[0] == "get"} <= {"pods", "leases"}
    store = informers_of(cached).store

    def written() -> bool:
        found = store.lookup("Deployment", NAMESPACE, "llm-inference")
        return isinstance(found, dict) and "gpu-reactor.io/last-action" in found["metadata"].get("annotations", {})

    eventually(written)  # the watch delivered the reactor's own write
    cached.sim.reset_counters()
    again = cached.post(cached.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    assert {o["result"] for o in again} == {"skipped"}
    assert reads(cached.sim) == {}


def test_a_watch_that_expires_lists_again(token_file: Path) -> None:
    """kube-apiserver's watch cache answers a resourceVersion older than its window with a 410 Expired ERROR
    event: the informer lists again and catches up on what it missed."""
    with SimCluster(watch_history=3).start() as sim:
        sim.load_manifests((HERE / "fixtures" / "cluster.yaml").read_text())
        sim.settle()
        metrics = Metrics(CollectorRegistry())
        kube = KubeGateway.for_url(sim.url, make_settings(token_file).kube, metrics)
        informers = Informers(kube, [NAMESPACE], watch_seconds=1)
        informer = next(i for i in informers.informers if i.kind == "Deployment")
        informers.start()
        try:
            eventually(lambda: not informers.unsynced())
            watches = sim.requests[("watch", "deployments", "")]
            sim.inject_fault(verb="watch", resource="deployments", status=500, count=3)  # ~3 s off the stream
            eventually(lambda: sim.requests[("watch", "deployments", "")] > watches + 1)
            for n in range(5):  # more changes than the window keeps
                annotate(sim, {"team/touched": str(n)})
            eventually(lambda: informer.relists == 2)
            cached = informers.store.lookup("Deployment", NAMESPACE, "llm-inference")
            assert isinstance(cached, dict) and cached["metadata"]["annotations"]["team/touched"] == "4"
        finally:
            informers.stop(timeout=5)
            kube.close()


def annotate(sim: SimCluster, annotations: dict[str, str]) -> None:
    obj = sim.get("deployments", NAMESPACE, "llm-inference")
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    sim.apply(obj)


def test_a_pod_that_does_not_exist_costs_no_workload_read(cached: Reactor) -> None:
    """An invented pod name is looked up as `<replicaset>-<suffix>` in the cache: a miss there is "does not exist"."""
    body = cached.alerts("GPUUnderutilized", "llm-inference", "server")
    body["alerts"] = body["alerts"][:1]
    body["alerts"][0]["labels"]["pod"] = "invented-7f9c8d6b5-abcde"
    cached.sim.reset_counters()
    (outcome,) = cached.post(body).get_json()["outcomes"]
    assert outcome["result"] == "skipped"
    assert reads(cached.sim) == {}
    assert cached.sim.requests[("get", "pods", "")] == 1


def test_a_stale_cache_is_a_409_and_the_reread_decides(cached: Reactor) -> None:
    informers_of(cached).stop(timeout=5)  # the cache stops following: it still holds 4 GPUs
    deployment = cached.sim.get("deployments", NAMESPACE, "llm-inference")
    server = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "server")
    server["resources"] = {"limits": {GPU: "2"}, "requests": {GPU: "2"}}
    cached.sim.apply(deployment)
    cached.sim.settle()
    body = cached.alerts("GPUUnderutilized", "llm-inference", "server")
    cached.sim.reset_counters()
    outcomes = cached.post(body).get_json()["outcomes"]
    assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("applied", 2, 1)}
    assert gpus(cached.sim) == "1"
    assert cached.sim.requests[("patch", "deployments", "")] == 2  # the stale one (409), then the right one
    assert cached.sim.requests[("get", "deployments", "")] == 1  # the re-read went to the API


def test_readiness_waits_for_the_first_list(sim: SimCluster, token_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "READY_CACHE_SECONDS", 0.0)
    r = build_reactor(sim, make_settings(token_file, kube={"timeout": "2s", "watchCache": True}))
    try:
        answer = r.probe("/readyz")
        assert answer.status == 503 and "cache not synced yet" in answer.json()["error"]
        assert r.metric("reactor_cache_synced", kind="Deployment") == 0  # read when scraped
        informers_of(r).start()
        eventually(lambda: r.probe("/readyz").status == 200)
        assert r.metric("reactor_cache_synced", kind="Deployment") == 1
        assert r.metric("reactor_cache_objects", kind="Deployment") == len(r.sim.list("deployments", NAMESPACE))
    finally:
        informers_of(r).stop(timeout=5)
        r.service.kube.close()


def test_stop_ends_the_informers_at_once_even_in_long_watches(sim: SimCluster, token_file: Path) -> None:
    """Watches of 5 minutes (the default) are ended by `stop`: no thread is left blocked in a read."""
    sim._ctx.bookmark_interval = 60.0  # as upstream (about a minute): the streams stay silent
    kube = KubeGateway.for_url(sim.url, make_settings(token_file).kube, Metrics(CollectorRegistry()))
    informers = Informers(kube, [NAMESPACE])
    informers.start()
    try:
        eventually(lambda: not informers.unsynced())
        eventually(lambda: sum(n for k, n in sim.requests.items() if k[0] == "watch") == len(informers.informers))
        started = time.monotonic()
        informers.stop(timeout=5)
        assert time.monotonic() - started < 3
        assert not [t.name for t in informers._threads if t.is_alive()]
    finally:
        kube.close()


def test_ending_a_watch_whose_stream_just_closed_is_not_an_error(sim: SimCluster, token_file: Path) -> None:
    """`stop` races the watch thread: a stream can close (its socket gone, its connection back in the pool) between
    `end_watches` taking the list and shutting it. urllib3 then raises EBADF/ValueError/RuntimeError; ending a
    stream that has already ended is the goal reached, and every other stream is still ended."""
    sim._ctx.bookmark_interval = 60.0
    kube = KubeGateway.for_url(sim.url, make_settings(token_file).kube, Metrics(CollectorRegistry()))
    stream = kube.watch_events("Deployment", NAMESPACE, kube.list_page("Deployment", NAMESPACE)[1], 60)
    ended: list[str] = []

    def read() -> None:
        try:
            for _ in stream:
                pass
        except TemporaryError as e:  # how a stream ended under a reader shows (the informer's stop check follows)
            ended.append(str(e))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    eventually(lambda: kube._streams.count() == 1)

    class Closed:
        def shutdown(self) -> None:
            raise OSError(9, "Bad file descriptor")

    class Released:
        def shutdown(self) -> None:
            raise RuntimeError("Cannot shutdown as connection has already been released to the pool")

    kube._streams.track(Closed())
    kube._streams.track(Released())
    try:
        kube.end_watches()
        reader.join(timeout=3)
        assert not reader.is_alive() and ended  # the real stream was still ended
    finally:
        kube.close()
