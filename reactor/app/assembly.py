"""Assembles the parts — metrics, gateway, engine, web app — from one `Settings`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flask import Flask
from prometheus_client import CollectorRegistry

from ..engine import Engine, utcnow
from ..errors import ConfigError, PermanentError
from ..informer import Informers
from ..kube import KubeGateway
from ..metrics import Metrics
from ..probes import Probes, Readiness
from ..settings import Settings
from ..statemac import load_state_keys
from ..web import TokenFile, create_app

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Service:
    app: Flask
    probes: Probes
    engine: Engine
    metrics: Metrics
    kube: KubeGateway
    informers: Informers | None = None  # started in the serving process (see runner.run), stopped at its exit


def assemble(settings: Settings, *, kube: KubeGateway | None = None, metrics: Metrics | None = None,
             registry: CollectorRegistry | None = None, clock: Callable[[], datetime] = utcnow) -> Service:
    if settings.server.token_file is None:
        raise ConfigError("server.tokenFile", "required: the webhook changes workloads and must be authenticated")
    try:
        token = TokenFile(settings.server.token_file)
    except OSError as e:
        raise ConfigError("server.tokenFile", f"cannot read {settings.server.token_file}: {e.strerror}") from e
    keys = load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file,
                           required=not settings.policy.dry_run)
    metrics = metrics or Metrics(registry)
    kube = kube or KubeGateway.connect(settings.kube, metrics)
    informers = Informers(kube, settings.policy.allow, settings.policy.deny) if settings.kube.watch_cache else None
    engine = Engine(settings=settings, kube=kube, metrics=metrics, clock=clock, state_keys=keys,
                    cache=informers.store if informers else None)
    app = create_app(settings, engine=engine, metrics=metrics, token=token)
    probes = Probes(metrics, Readiness(_readiness_probe(kube, informers)))
    if not settings.policy.allow:
        log.warning("no namespace is allowed: every alert will be skipped (set namespaces.allow)")
    return Service(app=app, probes=probes, engine=engine, metrics=metrics, kube=kube, informers=informers)


def _readiness_probe(kube: KubeGateway, informers: Informers | None) -> Callable[[], None]:
    """Ready when the API server answers and, with the watch cache, every informer has listed once."""

    def probe() -> None:
        kube.version()
        if informers is not None:
            informers.check()

    return probe


def check_ladder(service: Service) -> list[str]:
    """PriorityClasses of the ladder that do not exist in the cluster (checked at start, and again before acting)."""
    try:
        names = {(pc.get("metadata") or {}).get("name") for pc in service.kube.list_priority_classes()}
    except PermanentError as e:
        log.warning("cannot list PriorityClasses", extra={"error": str(e)})
        return []
    return [c for c in service.engine.policy.priority_ladder if c not in names]
