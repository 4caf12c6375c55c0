"""Helpers shared by the test suites: samples, and the reactor assembled against the embedded cluster."""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from flask.testing import FlaskClient
from prometheus_client import CollectorRegistry

from reactor.app.assembly import Service, assemble
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Kube, Settings, build_settings
from reactor.core.metrics import Metrics
from reactor.engine import utcnow
from reactor.intake.bearer import CHECK_SECONDS
from reactor.observe.probes import ProbeAnswer
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster

HERE = Path(__file__).parent
SAMPLES = HERE / "samples"
TOKEN = "test-token-0123456789abcdef"
NAMESPACE = "ml-workloads"
T = TypeVar("T")
STAND_IN = "gpu-reactor-tests.prometheus-stand-in"  # the app's extension: the stand-in its test clients feed


def sample(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / f"am-0.25-{name}.json").read_text())


def make_settings(token_file: Path, **policy: Any) -> Settings:
    doc: dict[str, Any] = {"namespaces": {"allow": [NAMESPACE]}, "server": {"tokenFile": str(token_file)},
                           "state": {"keyFile": str(state_key_file(token_file.parent))},
                           "kube": {"timeout": "2s", "qps": 1000, "burst": 1000}, "logging": {"format": "text"}}
    doc.update(policy)
    # `kube.watchCache` is on by default; these tests count API reads and build the service without starting its
    # informers, so they read with it off unless they ask for it (tests/cluster/test_watch_cache*.py do).
    doc["kube"] = {"watchCache": False, **doc["kube"]}
    return build_settings(doc, {})


@dataclass
class Reactor:
    """The assembled service with a Flask test client, and the cluster it acts on."""

    service: Service
    client: FlaskClient
    sim: SimCluster
    registry: CollectorRegistry
    prometheus: PrometheusStandIn | None = None  # what the confirm step asks (None: confirm off, or a real one)

    def post(self, body: Any, *, token: str | None = TOKEN, **kw: Any) -> Any:
        """The webhook's answer, once the Events it queued were sent (they go out on a background thread)."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        answer = self.client.post("/alerts", json=body, headers=headers, **kw)
        self.flush_events()
        return answer

    def flush_events(self) -> None:
        assert self.service.events.flush(timeout=30), "the reactor's Events were not sent in time"

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def probe(self, path: str, method: str = "GET") -> ProbeAnswer:
        """What the probe listener answers on `path` (the answer the probe server sends)."""
        return self.service.probes.answer(method, path)

    def pods(self, app: str) -> list[str]:
        pods = self.sim.list("pods", NAMESPACE, label_selector=f"app={app}")
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def alerts(self, name: str, app: str, container: str, *, value: float | None = None, gpus: int | None = None,
               **kw: Any) -> dict[str, Any]:
        """A notification with one alert per current pod of `app`, shaped as Alertmanager sends it."""
        specs = [AlertSpec(name, NAMESPACE, pod, container, value, gpus, **kw) for pod in self.pods(app)]
        return notification(specs)


class FeedingClient(FlaskClient):
    """The Flask test client that first tells the Prometheus stand-in that the rules fire what a test posts: the
    tests' notifications stand for genuine ones, so the confirm step (sources/confirm.py, over real HTTP) confirms
    them, with the value their annotations say. The stand-in is the app's (`feeding_client`); without one, posts go
    untold (a forged alert)."""

    def post(self, *args: Any, **kw: Any) -> Any:
        body = kw.get("json")
        stand_in = self.application.extensions.get(STAND_IN)
        if stand_in is not None and isinstance(body, dict) and (args[:1] or (kw.get("path"),))[0] == "/alerts":
            stand_in.observe(body)
        return super().post(*args, **kw)


def with_prometheus(settings: Settings, *, instead: bool = False) -> tuple[Settings, PrometheusStandIn | None]:
    """`settings` pointed at a new Prometheus stand-in for the confirm step, unless confirm is off or a URL is set
    (`instead`: also in place of the URL set, e.g. the deployed policy's in-cluster Service)."""
    if not settings.confirm.enabled or (settings.confirm.url is not None and not instead):
        return settings, None
    stand_in = PrometheusStandIn().start()
    return replace(settings, confirm=replace(settings.confirm, url=stand_in.url)), stand_in


def feeding_client(service: Service, stand_in: PrometheusStandIn | None, *, feed: bool = True) -> FlaskClient:
    """The service's test client (and every other of its app), feeding `stand_in` (see `FeedingClient`) when `feed`."""
    service.app.test_client_class = FeedingClient
    service.app.extensions[STAND_IN] = stand_in if feed else None
    return service.app.test_client()


def release(reactor: Reactor) -> None:
    """Stop the stand-in and close the confirm step's kept connections when `reactor` is collected (an unclosed
    socket collected in another test would fail that test)."""
    confirm = reactor.service.engine.confirm
    api = getattr(confirm, "api", None)
    stand_in = reactor.prometheus
    weakref.finalize(reactor, _release, stand_in, api)


def _release(stand_in: PrometheusStandIn | None, api: Any) -> None:
    if api is not None:
        api.close()
    if stand_in is not None:
        stand_in.stop()


@contextmanager
def kube_gateway(sim: SimCluster) -> Iterator[KubeGateway]:
    """The reactor's API client to `sim`, unthrottled (qps and burst 1000), its own metrics; closed at the end."""
    gateway = KubeGateway.for_url(sim.url, Kube(qps=1000, burst=1000), Metrics(CollectorRegistry()))
    try:
        yield gateway
    finally:
        gateway.close()


def reactor_for(sim: SimCluster, token_file: Path, **policy: Any) -> Reactor:
    """The service assembled against `sim` with the test policy, `policy` merged over it."""
    return build_reactor(sim, make_settings(token_file, **policy))


@contextmanager
def serving(sim: SimCluster, token_file: Path, **policy: Any) -> Iterator[Reactor]:
    """`reactor_for` whose API client is closed when the block ends."""
    r = reactor_for(sim, token_file, **policy)
    try:
        yield r
    finally:
        r.service.kube.close()


def build_reactor(sim: SimCluster, settings: Settings, *, clock: Callable[[], datetime] = utcnow,
                  feed: bool = True) -> Reactor:
    """The service assembled against `sim`; the confirm step asks a Prometheus stand-in that the test client feeds
    with what the test posts (`feed=False`: the test says itself what Prometheus fires, through `prometheus`)."""
    settings, stand_in = with_prometheus(settings)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    kube = KubeGateway.for_url(sim.url, settings.kube, metrics)
    service = assemble(settings, kube=kube, metrics=metrics, clock=clock)
    service.app.testing = True
    reactor = Reactor(service, feeding_client(service, stand_in, feed=feed), sim, registry, stand_in)
    release(reactor)
    return reactor


def files_checked() -> None:
    """Wait until a running reactor checks its token and state key files again: it stats them at most every
    CHECK_SECONDS (reactor/intake/bearer.py, reactor/state/seal.py), so a change takes effect within that."""
    time.sleep(CHECK_SECONDS + 0.05)


def eventually(check: Callable[[], bool], seconds: float = 10.0, *, every: float = 0.05) -> None:
    """Return once `check()` holds; fail when it has not within `seconds` (what a background thread or a watch
    does, it does in its own time)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return
        time.sleep(every)
    raise AssertionError("condition not met in time")


class Ticks(Generic[T]):
    """A clock that moves when the test moves it (`now`: seconds of a monotonic clock, or a datetime)."""

    def __init__(self, now: T) -> None:
        self.now = now

    def __call__(self) -> T:
        return self.now
