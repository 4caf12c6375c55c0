"""Assembles the parts — metrics, gateway, engine, web app — from one `Settings`."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Flask
from prometheus_client import CollectorRegistry

from reactor.act.ledger import LeaseLedger, Ledger, MemoryLedger
from reactor.app import preflight
from reactor.app.arenas import release_free_memory
from reactor.cluster.informer import Informers
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Settings
from reactor.config.settings import warnings as settings_warnings
from reactor.core.errors import PermanentError, ReactorError
from reactor.core.metrics import Metrics
from reactor.core.model import PATCHABLE_KINDS
from reactor.engine import Engine, utcnow
from reactor.intake.web import create_app
from reactor.observe.lease import VerifierLease
from reactor.observe.probes import Probes, Readiness
from reactor.observe.verifier import Verifier
from reactor.sources.alertmanager import firing_source
from reactor.sources.confirm import confirmer
from reactor.state.seal import load_state_keys

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Service:
    app: Flask
    probes: Probes
    engine: Engine
    metrics: Metrics
    kube: KubeGateway
    verifier: Verifier | None = None  # None in dry run: nothing is written, nothing to verify
    informers: Informers | None = None  # started in the serving process (see runner.run), stopped at its exit


def assemble(settings: Settings, *, kube: KubeGateway | None = None, metrics: Metrics | None = None,
             registry: CollectorRegistry | None = None, clock: Callable[[], datetime] = utcnow) -> Service:
    token = preflight.token_file(settings)
    keys = load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file,
                           required=not settings.policy.dry_run)
    metrics = metrics or Metrics(registry)
    kube = kube or KubeGateway.connect(settings.kube, metrics)
    informers = Informers(kube, settings.policy.allow, settings.policy.deny,
                          after_list=release_free_memory) if settings.kube.watch_cache else None
    if informers is not None:
        watch_cache_gauges(metrics, informers)
    engine = Engine(settings=settings, kube=kube, metrics=metrics, clock=clock, state_keys=keys,
                    cache=informers.store if informers else None, ledger=state_ledger(settings, kube),
                    firing=firing_source(settings, metrics), confirm=confirmer(settings, metrics.registry))
    verifier = None
    if keys is not None and not settings.policy.dry_run:
        verifier = Verifier(settings=settings, kube=kube, actor=engine.actor, view=engine.view,
                            events=engine.events, metrics=metrics, clock=clock, lease=verifier_lease(settings, kube),
                            cache=informers.store if informers else None)
        engine.on_applied = verifier.track
    app = create_app(settings, engine=engine, metrics=metrics, token=token)
    probes = Probes(metrics, Readiness(_readiness_probe(kube, informers)))
    for warning in settings_warnings(settings):
        log.warning("the policy acts nowhere or unconfirmed", extra={"detail": warning})
    return Service(app=app, probes=probes, engine=engine, metrics=metrics, kube=kube, verifier=verifier,
                   informers=informers)


def watch_cache_gauges(metrics: Metrics, informers: Informers) -> None:
    """reactor_cache_objects and reactor_cache_synced, read from the store and the informers at scrape time."""
    metrics.cache_objects.read_from(lambda: {(kind,): n for kind, n in informers.store.counts().items()})
    metrics.cache_synced.read_from(lambda: {(kind,): float(ok) for kind, ok in informers.synced_kinds().items()})


def verifier_lease(settings: Settings, kube: KubeGateway, identity: str = "") -> VerifierLease | None:
    """The Lease that elects one verifying replica; None when `verify.leaseName` is null (one replica)."""
    server = settings.server
    if server.lease_name is None or server.lease_namespace is None:
        return None
    duration = max(3 * settings.policy.verify_interval, timedelta(seconds=15))
    return VerifierLease(kube, namespace=server.lease_namespace, name=server.lease_name,
                         identity=identity or f"{socket.gethostname()}-{os.getpid()}", duration=duration,
                         kinds=PATCHABLE_KINDS | settings.adapters.kinds())


def state_ledger(settings: Settings, kube: KubeGateway) -> Ledger | None:
    """Where the reactor's latest write per workload is kept: a Lease in its namespace (`state.ledgerName`), or
    this process (null: one replica); none in dry run, which writes nothing."""
    if settings.policy.dry_run:
        return None
    server = settings.server
    if server.state_ledger_name is None or server.lease_namespace is None:
        return MemoryLedger()
    return LeaseLedger(kube, namespace=server.lease_namespace, name=server.state_ledger_name)


def _readiness_probe(kube: KubeGateway, informers: Informers | None) -> Callable[[], None]:
    """Ready when the API server answers and, with the watch cache, every informer has listed once."""

    def probe() -> None:
        kube.version()
        if informers is not None:
            informers.check()

    return probe


def check_capabilities(service: Service) -> str | None:
    """Ask the server what it can do, at start (the gateway asks again after a reconnect): logged, and why the
    policy's in-place changes will be refused here (None: they will not be)."""
    try:
        found = service.kube.discover()
    except ReactorError as e:
        log.warning("kube-apiserver discovery failed at start; asked again on first use", extra={"error": str(e)})
        return None
    policy = service.engine.policy
    refusal = found.in_place_refusal() if policy.resizes_pods_in_place and policy.cpu_apply_to == "pods" else None
    if refusal is not None:
        log.warning("cpu.applyTo pods will be refused (in-place-unavailable)", extra={"reason": refusal})
    return refusal


def check_ladder(service: Service) -> list[str]:
    """PriorityClasses of the ladder that do not exist in the cluster (checked at start, and again before acting)."""
    try:
        names = {(pc.get("metadata") or {}).get("name") for pc in service.kube.list_priority_classes()}
    except PermanentError as e:
        log.warning("cannot list PriorityClasses", extra={"error": str(e)})
        return []
    return [c for c in service.engine.policy.priority_ladder if c not in names]
