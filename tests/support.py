"""Helpers shared by the test suites: samples, and the reactor assembled against the embedded cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient
from prometheus_client import CollectorRegistry

from reactor.app.assembly import Service, assemble
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Settings, build_settings
from reactor.core.metrics import Metrics
from reactor.engine import utcnow
from reactor.observe.probes import ProbeAnswer
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster

HERE = Path(__file__).parent
SAMPLES = HERE / "samples"
TOKEN = "test-token-0123456789abcdef"
NAMESPACE = "ml-workloads"


def sample(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / f"am-0.25-{name}.json").read_text())


def make_settings(token_file: Path, **policy: Any) -> Settings:
    doc: dict[str, Any] = {"namespaces": {"allow": [NAMESPACE]}, "server": {"tokenFile": str(token_file)},
                           "state": {"keyFile": str(state_key_file(token_file.parent))},
                           "kube": {"timeout": "2s", "qps": 1000, "burst": 1000}, "logging": {"format": "text"}}
    doc.update(policy)
    # `kube.watchCache` is on by default; these tests count API reads and build the service without starting its
    # informers, so they read with it off unless they ask for it (tests/test_watch_cache*.py do).
    doc["kube"] = {"watchCache": False, **doc["kube"]}
    return build_settings(doc, {})


@dataclass
class Reactor:
    """The assembled service with a Flask test client, and the cluster it acts on."""

    service: Service
    client: FlaskClient
    sim: SimCluster
    registry: CollectorRegistry

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


def build_reactor(sim: SimCluster, settings: Settings, *, clock: Callable[[], datetime] = utcnow) -> Reactor:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    kube = KubeGateway.for_url(sim.url, settings.kube, metrics)
    service = assemble(settings, kube=kube, metrics=metrics, clock=clock)
    service.app.testing = True
    return Reactor(service, service.app.test_client(), sim, registry)
