"""Assembles the parts — metrics, gateway, engine, web app — from one `Settings`."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Flask
from prometheus_client import CollectorRegistry

from reactor.act.actor import Actor
from reactor.act.budget import GLOBAL, Budget
from reactor.act.ledger import LeaseLedger, Ledger, MemoryLedger
from reactor.act.metrics import ActMetrics
from reactor.act.posting import EventPoster
from reactor.act.recording import Recorder
from reactor.app import preflight
from reactor.app.arenas import release_free_memory
from reactor.app.background import Background
from reactor.app.probe_server import ProbeServer
from reactor.cluster.cache import Store
from reactor.cluster.informer import Informers
from reactor.cluster.kube import KubeGateway
from reactor.cluster.metrics import ClusterMetrics
from reactor.cluster.view import ClusterView
from reactor.config.settings import Settings
from reactor.config.settings import warnings as settings_warnings
from reactor.core.confirm import Confirmer
from reactor.core.errors import ReactorError
from reactor.core.firing import FiringAlerts
from reactor.core.metrics import Metrics
from reactor.core.model import PATCHABLE_KINDS, WorkloadRef
from reactor.engine import NotificationHandler, utcnow
from reactor.engine.decider import WorkloadDecider
from reactor.engine.firings import Firings, WorkloadLocks
from reactor.engine.givebacks import GiveBacks
from reactor.engine.metrics import EngineMetrics
from reactor.engine.reads import Readers
from reactor.engine.rebalancing import Rebalancing
from reactor.intake.metrics import WebhookMetrics
from reactor.intake.web import create_app
from reactor.observe.finops import GpuHours
from reactor.observe.lease import VerifierLease
from reactor.observe.metrics import ObserveMetrics
from reactor.observe.probes import Probes, Readiness
from reactor.observe.rebalancer import Rebalancer, Waitlist
from reactor.observe.stalled import StalledReverts
from reactor.observe.verifier import Verifier
from reactor.observe.worklist import Worklist
from reactor.resolve.owners import Owners
from reactor.sources.alertmanager import firing_source
from reactor.sources.confirm import confirmer
from reactor.sources.metrics import SourceMetrics
from reactor.state.seal import StateKeys, load_state_keys
from reactor.state.writes import StateWrites

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Service:
    app: Flask
    probes: Probes
    engine: NotificationHandler
    metrics: Metrics
    kube: KubeGateway
    events: EventPoster
    verifier: Verifier | None = None  # None in dry run: nothing is written, nothing to verify
    informers: Informers | None = None  # started in the serving process (see runner.run), stopped at its exit
    rebalancer: Rebalancer | None = None  # the pass over waiting rebalances; None unless rebalancing writes
    # What runs beside the answers, in start order (reactor/app/background.py): the runner starts it in the
    # serving process and stops it in reverse at its exit.
    background: tuple[Background, ...] = ()


@dataclass(frozen=True, slots=True)
class ActParts:
    """What reads a workload and writes to it, shared by the notification path and the verifier."""

    view: ClusterView
    events: EventPoster
    actor: Actor
    recorder: Recorder
    ledger: Ledger | None


def assemble(settings: Settings, *, kube: KubeGateway | None = None, metrics: Metrics | None = None,
             registry: CollectorRegistry | None = None, clock: Callable[[], datetime] = utcnow,
             probe_listener: socket.socket | None = None) -> Service:
    token = preflight.token_file(settings)
    keys = load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file,
                           required=not settings.policy.dry_run)
    metrics = metrics or Metrics(registry)
    declare_metrics(metrics)
    kube = kube or KubeGateway.connect(settings.kube, metrics)
    informers = Informers(kube, settings.policy.allow, settings.policy.deny,
                          after_list=release_free_memory) if settings.kube.watch_cache else None
    if informers is not None:
        watch_cache_gauges(metrics, informers)
    cache = informers.store if informers else None
    parts = act_parts(settings, kube=kube, metrics=metrics, clock=clock, state_keys=keys,
                      ledger=state_ledger(settings, kube))
    verifier = None
    if keys is not None and not settings.policy.dry_run:
        verifier = build_verifier(settings, kube=kube, metrics=metrics, parts=parts, clock=clock, cache=cache,
                                  lease=verifier_lease(settings, kube))
    engine, rebalancer = build_engine(settings, kube=kube, metrics=metrics, parts=parts, clock=clock, state_keys=keys,
                                      cache=cache, firing=firing_source(settings, metrics),
                                      confirm=confirmer(settings, metrics),
                                      on_applied=verifier.track if verifier is not None else None)
    app = create_app(settings, engine=engine, metrics=metrics, token=token)
    probes = Probes(metrics, Readiness(_readiness_probe(kube, informers)))
    for warning in settings_warnings(settings):
        log.warning("the policy acts nowhere or unconfirmed", extra={"detail": warning})
    rebalancer = rebalancer if not settings.policy.dry_run else None
    return Service(app=app, probes=probes, engine=engine, metrics=metrics, kube=kube, events=parts.events,
                   verifier=verifier, informers=informers, rebalancer=rebalancer,
                   background=background(parts.events, probes, verifier, informers, rebalancer, probe_listener))


def background(events: EventPoster, probes: Probes, verifier: Verifier | None, informers: Informers | None,
               rebalancer: Rebalancer | None, probe_listener: socket.socket | None) -> tuple[Background, ...]:
    """The parts that run in this configuration, in start order: the probes first (the kubelet's /healthz answers
    while the cache lists; /readyz says it is not ready), the Events' sender before anything that posts one (and
    so stopped after them), the cache before the verifier that reads it; the rebalancer only when it acts."""
    parts: list[Background | None] = [
        ProbeServer(probe_listener, probes) if probe_listener is not None else None,
        events, informers, verifier, rebalancer,
    ]
    return tuple(part for part in parts if part is not None)


def build_verifier(settings: Settings, *, kube: KubeGateway, metrics: Metrics, parts: ActParts,
                   clock: Callable[[], datetime], cache: Store | None, lease: VerifierLease | None) -> Verifier:
    """The verifier and its parts: what it follows (Worklist), how it reverts a stalled change (StalledReverts),
    the GPU-hours it counts, and the state it seals (`verified`)."""
    policy = settings.policy
    worklist = Worklist(policy=policy, kube=kube, adapters=settings.adapters, lease=lease, cache=cache, clock=clock)
    hours = GpuHours(metrics, policy.gpu_hourly_cost, policy.gpu_resource, allowed=policy.namespace_allowed)
    reverts = StalledReverts(policy=policy, kube=kube, actor=parts.actor, view=parts.view, events=parts.events,
                             metrics=metrics)
    return Verifier(settings=settings, kube=kube, actor=parts.actor, view=parts.view, metrics=metrics,
                        clock=clock, worklist=worklist, reverts=reverts, hours=hours,
                        state=StateWrites(parts.view.state_keys, policy.cooldown), cache=cache)


def act_parts(settings: Settings, *, kube: KubeGateway, metrics: Metrics, clock: Callable[[], datetime],
              state_keys: StateKeys | None, ledger: Ledger | None) -> ActParts:
    """The act step and what it reads through; the budget's gauges read at scrape time (never stale)."""
    policy = settings.policy
    if state_keys is None and not policy.dry_run:
        raise ValueError("a reactor that may write needs state keys (see state.seal.load_state_keys)")
    if ledger is None and not policy.dry_run:
        ledger = MemoryLedger()  # the latest write per workload, in this process: one replica
    budget = Budget(policy.budget_global, policy.budget_namespace)
    counts = ActMetrics.of(metrics)
    counts.budget_limit.labels(scope="global").set(policy.budget_global.actions)
    counts.budget_limit.labels(scope="namespace").set(policy.budget_namespace.actions)

    def budget_used() -> dict[tuple[str, ...], float]:
        used = budget.used(clock())
        return {("global",): used.get(GLOBAL, 0),
                ("namespace",): max((v for k, v in used.items() if k != GLOBAL), default=0)}

    counts.budget_used.read_from(budget_used)
    view = ClusterView(adapters=settings.adapters, gpu_resource=policy.gpu_resource, state_keys=state_keys)
    # Events go through a queue and a background thread: an Events API that stalls never delays the answer.
    events = EventPoster(kube, dropped=counts.events_dropped.inc)
    actor = Actor(kube=kube, budget=budget, gpu_resource=policy.gpu_resource,
                  state=StateWrites(state_keys, policy.cooldown), events=events,
                  conflict_retries=settings.kube.conflict_retries, dry_run=policy.dry_run,
                  cpu_apply_to=policy.cpu_apply_to, adapters=settings.adapters, ledger=ledger,
                  reverse_after=policy.reverse_after)
    return ActParts(view=view, events=events, actor=actor, recorder=Recorder(metrics), ledger=ledger)


def build_engine(settings: Settings, *, kube: KubeGateway, metrics: Metrics, parts: ActParts | None = None,
                 clock: Callable[[], datetime] = utcnow, state_keys: StateKeys | None = None,
                 cache: Store | None = None, firing: FiringAlerts | None = None, confirm: Confirmer | None = None,
                 on_applied: Callable[[list[WorkloadRef]], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> tuple[NotificationHandler, Rebalancer | None]:
    """The notification handler and its parts (and the rebalancer's pass when rebalancing is on): what `reactor
    plan` runs in dry run, and what `assemble` serves."""
    policy = settings.policy
    parts = parts or act_parts(settings, kube=kube, metrics=metrics, clock=clock, state_keys=state_keys, ledger=None)
    readers, owners, locks, firings = Readers(kube, settings, cache=cache, monotonic=monotonic), Owners(), \
        WorkloadLocks(), Firings()
    decider = WorkloadDecider(policy=policy, actor=parts.actor, view=parts.view, recorder=parts.recorder,
                              events=parts.events, firings=firings, ledger=parts.ledger, state_keys=state_keys)
    rebalancing, rebalancer = None, None
    if policy.rebalance_enabled:
        waitlist = Waitlist()
        givebacks = GiveBacks(policy=policy, metrics=metrics, decider=decider, readers=readers, owners=owners,
                              locks=locks, waitlist=waitlist, cache=cache)
        rebalancing = Rebalancing(policy=policy, metrics=metrics, decider=decider, events=parts.events,
                                  readers=readers, owners=owners, locks=locks, source=firing, waitlist=waitlist,
                                  givebacks=givebacks, clock=clock, confirm=confirm, on_applied=on_applied)
        rebalancer = Rebalancer(waitlist=waitlist, steps=rebalancing, interval=policy.verify_interval, clock=clock)
    handler = NotificationHandler(settings=settings, metrics=metrics, recorder=parts.recorder, readers=readers,
                                  owners=owners, firings=firings, locks=locks, decider=decider,
                                  rebalancing=rebalancing, clock=clock, confirm=confirm, on_applied=on_applied)
    return handler, rebalancer


def plan_engine(settings: Settings, kube: KubeGateway, metrics: Metrics, state_keys: StateKeys | None,
                firing: FiringAlerts) -> NotificationHandler:
    """The engine `reactor plan` runs (its settings in dry run): built as the service's is, with no verifier."""
    return build_engine(settings, kube=kube, metrics=metrics, state_keys=state_keys, firing=firing)[0]


def declare_metrics(metrics: Metrics) -> None:
    """Every stage's metric set on the registry from the start, whatever this configuration builds (a dry run has no
    verifier, rebalancing may be off): dashboards see every family, its known labels at zero, before any event."""
    for kind in (WebhookMetrics, EngineMetrics, ActMetrics, ClusterMetrics, ObserveMetrics, SourceMetrics):
        kind.of(metrics)


def watch_cache_gauges(metrics: Metrics, informers: Informers) -> None:
    """reactor_cache_objects and reactor_cache_synced, read from the store and the informers at scrape time."""
    counts = ClusterMetrics.of(metrics)
    counts.cache_objects.read_from(lambda: {(kind,): n for kind, n in informers.store.counts().items()})
    counts.cache_synced.read_from(lambda: {(kind,): float(ok) for kind, ok in informers.synced_kinds().items()})


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
    except ReactorError as e:  # refused, or the server went away since the preflight: not ready, not dead
        log.warning("cannot list PriorityClasses", extra={"error": str(e)})
        return []
    return [c for c in service.engine.policy.priority_ladder if c not in names]
