"""One notification in, one outcome per alert out: screen → resolve → decide → act → record.

Alerts on the same workload are folded into one signal and get one decision and at most one
write. Reads are shared through the notification's `Reader`. Failures are classified once
(`core.errors.classify`): one a retry can fix, met while resolving a pod or deciding a workload,
does not stop the others; it is raised at the end (`RetryLater`, with every outcome) so the webhook
answers 503 and Alertmanager retries (idempotence makes the retry safe). One a retry cannot fix
fails that pod's or workload's alerts only, answered 200.

Rebalancing (`rebalance.enabled`; the pure verdicts in policy/rebalance.py): a receiver alert refused for lack of GPU
quota only asks the alert source (`firing`, one call per receiver decision) which workloads of the namespace idle
now, decides each one as it would on its own alert, writes the first qualifying donor's change through the act step,
and grows the receiver once the quota's status shows the room — at once, or from the rebalancer's pass
(observe/rebalancer.py), which also gives the donor back (timeout, or the receiver's resolve).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from reactor.act.actor import Acted, Actor, Attempt, KeptChanging
from reactor.act.budget import GLOBAL, Budget
from reactor.act.events import Recorder
from reactor.act.ledger import Ledger, MemoryLedger
from reactor.act.posting import EventPoster, workload_event
from reactor.act.resize import compute_facts, cpu_bounds, memory_bounds
from reactor.cluster.adapted import adapted_refusal
from reactor.cluster.cache import Store
from reactor.cluster.kube import KubeGateway
from reactor.cluster.view import ClusterView
from reactor.cluster.workloads import hpa_targets, namespace_bounds
from reactor.config.fields import format_duration
from reactor.config.settings import Settings
from reactor.core.errors import AlertSourceUnavailable, Failure, RetryLater, classify
from reactor.core.firing import FiringAlerts
from reactor.core.metrics import Metrics
from reactor.core.model import (
    KNOWN_ALERTS,
    TEST_ALERT,
    Action,
    Alert,
    Bounds,
    ComputeBounds,
    Decision,
    Mode,
    Notification,
    Rebalance,
    Result,
    Shortfall,
    Signal,
    Skip,
    SkipReason,
    Status,
    Workload,
    WorkloadRef,
)
from reactor.core.outcome import Outcome, alert_outcome, decision_fields
from reactor.integrations.adapters import Adapters
from reactor.observe.rebalancer import GROW, RESTORE, Rebalancer, Waiting
from reactor.policy import alert_refusal, decide, decide_given_back, effective_mode, fold, owner_refusal
from reactor.policy.rebalance import MAX_DONOR_PODS, Candidate, Verdict, no_donor, qualify, ranked
from reactor.resolve.owners import Owner, Owners, Reader, UnknownPodLimit, resolve_owner, valid_name, valid_namespace
from reactor.state.seal import StateKeys
from reactor.state.writes import StateWrites

log = logging.getLogger(__name__)

DEDUP_SIZE = 10_000
WORKLOAD_MEMO = 1024  # workloads remembered as read, by resourceVersion (see Engine._workload)
WORKLOAD_LOCKS = 64
# Answered 200, not 503: a retry would meet the same work and the same deadline. The group is sent
# again at its next group_interval while it fires, and workloads decided this time then refuse early.
_DEADLINE = Skip(SkipReason.DEADLINE_EXCEEDED, "the notification's deadline (server.notificationDeadline) passed "
                                               "before this alert was decided")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Namespace:
    """What one notification learned about a namespace: bounds, and the GPUs, CPU and memory its own actions
    reserved.

    The CPU (memory) bounds are read once per notification, like the GPU's: an in-place resize changes `status.used` at
    once (the watch may deliver it mid-notification), and the reservation must not be counted twice.
    """

    bounds: Bounds | None = None
    reserved: dict[str, int] = field(default_factory=dict)  # quota name -> GPUs
    cpu_bounds: ComputeBounds | None = None
    memory_bounds: ComputeBounds | None = None
    # (quota, resource) -> millicores (cpu lines) or bytes (memory lines): one map, the resource tells them apart
    compute_reserved: dict[tuple[str, str], int] = field(default_factory=dict)

    def reserve(self, action: Action) -> None:
        for name, gpus in action.quota_charges:
            self.reserved[name] = self.reserved.get(name, 0) + gpus
        for key, millis in action.compute_quota_charges:
            self.compute_reserved[key] = self.compute_reserved.get(key, 0) + millis


class Engine:
    """Handles notifications; safe to call from several threads at once."""

    def __init__(
        self, *, settings: Settings, kube: KubeGateway, metrics: Metrics,
        budget: Budget | None = None, clock: Callable[[], datetime] = utcnow, state_keys: StateKeys | None = None,
        monotonic: Callable[[], float] = time.monotonic, cache: Store | None = None,
        events: EventPoster | None = None, ledger: Ledger | None = None, firing: FiringAlerts | None = None,
    ) -> None:
        self.monotonic = monotonic
        self.cache = cache  # the watch-fed store (reactor/cluster/cache.py) the notification's Reader reads first
        if state_keys is None and not settings.policy.dry_run:
            raise ValueError("an Engine that may write needs state keys (see statemac.load_state_keys)")
        self.state_keys = state_keys
        # The reactor's latest write per workload (state/ledger.py): in this process unless the assembly gives a Lease.
        self.ledger = ledger if ledger is not None else (None if settings.policy.dry_run else MemoryLedger())
        self.adapters = settings.adapters  # the kinds resolve, the gateway and the act step go through (a value)
        self.settings = settings
        self.policy = settings.policy
        self.kube = kube
        self.metrics = metrics
        self.budget = budget or Budget(self.policy.budget_global, self.policy.budget_namespace)
        self.clock = clock
        self._applied: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._workloads: OrderedDict[tuple[Any, ...], Workload] = OrderedDict()  # see `_workload`
        self._refusals: OrderedDict[tuple[Any, ...], None] = OrderedDict()  # see `_refusal_event`
        self._owners = Owners()
        self.recorder = Recorder(metrics)
        # How an object read becomes the workload decided on; the verifier reads through the same view.
        self.view = ClusterView(adapters=self.adapters, gpu_resource=self.policy.gpu_resource, state_keys=state_keys)
        # Events go through a queue and a background thread: an Events API that stalls never delays the answer.
        self.events = events or EventPoster(kube, dropped=metrics.events_dropped.inc)
        self.actor = Actor(kube=kube, budget=self.budget, gpu_resource=self.policy.gpu_resource,
                           state=StateWrites(state_keys, self.policy.cooldown), events=self.events,
                           conflict_retries=settings.kube.conflict_retries, dry_run=self.policy.dry_run,
                           cpu_apply_to=self.policy.cpu_apply_to, adapters=self.adapters, ledger=self.ledger,
                           reverse_after=self.policy.reverse_after)
        self._lock = threading.Lock()
        # The verifier's `track`, when one runs: called once per notification with every change it applied.
        self.on_applied: Callable[[list[WorkloadRef]], None] | None = None
        # One thread at a time per workload in this process (striped: bounded memory), so concurrent
        # copies of a notification meet the dedup cache instead of racing to a 409 and spending budget.
        self._workload_locks = tuple(threading.Lock() for _ in range(WORKLOAD_LOCKS))
        self.metrics.budget_limit.labels(scope="global").set(self.policy.budget_global.actions)
        self.metrics.budget_limit.labels(scope="namespace").set(self.policy.budget_namespace.actions)
        self.metrics.budget_used.read_from(self._budget_used)  # at scrape time: never stale after a storm
        # Rebalancing (policy/rebalance.py): the source of idle donors (None: no rebalance can run, and the refusal
        # says so), and the steps that wait for the API server's quota (observe/rebalancer.py; the runner starts it).
        self.firing = firing
        self._grow_refusals: dict[tuple[str, WorkloadRef, WorkloadRef], str] = {}  # a waiting growth's last refusal
        self.rebalancer = Rebalancer(interval=self.policy.verify_interval, clock=clock, grow=self._grow_step,
                                     give_back=self._give_back_step, restore=self._restore_step,
                                     expired=self._restore_expired)

    # --- the notification ---------------------------------------------------------------

    def handle(self, notification: Notification) -> list[Outcome]:
        now = self.clock()
        alerts = notification.alerts
        outcomes: dict[int, Outcome] = {}
        pending: list[int] = []
        received: dict[tuple[str, str], int] = {}
        targets: dict[tuple[str | None, str | None], Skip | None] = {}
        names: dict[str, Skip | None] = {}  # the verdict on each alert name, asked once per notification
        for i, alert in enumerate(alerts):
            counted = (_alertname(alert), alert.status)
            received[counted] = received.get(counted, 0) + 1
            skip = self._screen(alert, targets, names)
            if skip is None:
                pending.append(i)
            else:
                outcomes[i] = self.recorder.alert_skip(alert, self._known_workload(alert, skip), skip)
        for (name, status), count in received.items():
            self.metrics.child(self.metrics.alerts_received, name, status).inc(count)
        if notification.truncated_alerts:
            self._truncated(notification)
        server = self.settings.server
        reader = Reader(self.kube, server.max_unknown_pods,
                        self.monotonic() + server.notification_deadline.total_seconds(), self.monotonic,
                        cache=self.cache, adapters=self.adapters)
        failures: list[str] = []  # what a retry can fix (Failure.RETRY), one line per pod or workload
        groups, unresolved = self._resolve(reader, alerts, pending, failures)
        outcomes.update(unresolved)
        applied: list[WorkloadRef] = []
        try:
            self._decide_all(reader, alerts, groups, outcomes, now, applied, failures)
        finally:
            if applied and self.on_applied is not None:
                self.on_applied(applied)  # one Lease write for the whole notification
        answered = [outcomes[i] for i in range(len(alerts))]
        if failures:
            raise RetryLater(failures, answered)
        return answered

    def _truncated(self, notification: Notification) -> None:
        """Alertmanager left alerts out (the receiver's max_alerts): they reach nobody, so someone is told."""
        self.metrics.alerts_truncated.inc(notification.truncated_alerts)
        log.warning("Alertmanager truncated the notification: alerts left out were not seen",
                    extra={"truncated": notification.truncated_alerts, "alerts": len(notification.alerts),
                           "group_key": notification.group_key[:200], "receiver": notification.receiver[:100]})

    def _budget_used(self) -> dict[tuple[str, ...], float]:
        """reactor_budget_used now: the global window's count, and the fullest namespace's."""
        used = self.budget.used(self.clock())
        return {("global",): used.get(GLOBAL, 0),
                ("namespace",): max((v for k, v in used.items() if k != GLOBAL), default=0)}

    def _screen(self, alert: Alert, targets: dict[tuple[str | None, str | None], Skip | None],
                names: dict[str, Skip | None]) -> Skip | None:
        """Refusals that need no API call; `targets` and `names` hold the verdicts on each pod and alert name
        met so far in the notification."""
        if alert.name == TEST_ALERT:  # before any rail: it names no real pod, in any namespace
            return Skip(SkipReason.TEST_ALERT, "reactor doctor's test alert: received, nothing done")
        if alert.name not in names:
            names[alert.name] = alert_refusal(alert.name, self.policy)
        refused = names[alert.name]
        if refused is not None:
            return refused
        cluster = alert.labels.get("cluster")
        if self.policy.cluster is not None and cluster is not None and cluster != self.policy.cluster:
            # A central Alertmanager can misroute, and the same namespace/pod names exist in every cluster.
            return Skip(SkipReason.OTHER_CLUSTER,
                        f"the alert is for cluster {cluster!r}, this is {self.policy.cluster!r}")
        target = (alert.namespace, alert.pod)
        if target not in targets:
            targets[target] = self._target_skip(alert.namespace, alert.pod)
        skip = targets[target]
        if skip is not None:
            return skip
        if alert.firing:
            with self._lock:
                if alert.key in self._applied:
                    self._applied.move_to_end(alert.key)
                    return Skip(SkipReason.ALREADY_APPLIED, "this firing was already acted on")
        return None

    def _known_workload(self, alert: Alert, skip: Skip) -> WorkloadRef | None:
        """The workload a repeat was resolved to before (no API call), so its answer names it like the first did."""
        if skip.reason is not SkipReason.ALREADY_APPLIED or not alert.namespace or not alert.pod:
            return None
        known = self._owners.get(alert.namespace, alert.pod)
        return known[0] if known else None

    def _target_skip(self, namespace: str | None, pod: str | None) -> Skip | None:
        if not namespace or not pod:
            return Skip(SkipReason.NO_TARGET, "the alert has no namespace/pod (or exported_*) label")
        if not valid_namespace(namespace) or not valid_name(pod):
            return Skip(SkipReason.NO_TARGET, "namespace or pod label is not a valid Kubernetes name")
        if not self.policy.namespace_allowed(namespace):
            return Skip(SkipReason.NAMESPACE_NOT_ALLOWED, f"namespace {namespace!r} is not in the allow list")
        return None

    def _resolve(
        self, reader: Reader, alerts: Sequence[Alert], pending: list[int], failures: list[str]
    ) -> tuple[dict[WorkloadRef, tuple[Owner, list[int]]], dict[int, Outcome]]:
        by_pod: dict[tuple[str, str], list[int]] = {}  # the alerts of each pod, in order: one resolve per pod
        for i in pending:
            alert = alerts[i]
            same_pod = by_pod.get((alert.namespace, alert.pod))  # type: ignore[arg-type]
            if same_pod is None:
                by_pod[alert.namespace, alert.pod] = [i]  # type: ignore[index]
            else:
                same_pod.append(i)
        by_namespace: dict[str, set[str]] = defaultdict(set)
        for namespace, pod_name in by_pod:
            by_namespace[namespace].add(pod_name)
        unlisted: dict[str, Exception] = {}  # namespaces whose pod LIST failed: their pods' alerts fail alike
        for namespace, pods in by_namespace.items():
            try:
                reader.prime_pods(namespace, {p for p in pods if self._owners.get(namespace, p) is None})
            except Exception as e:  # noqa: BLE001 - classified per pod below, like a failed GET of the pod
                unlisted[namespace] = e
        groups: dict[WorkloadRef, tuple[Owner, list[int]]] = {}
        unresolved: dict[int, Outcome] = {}
        resolved: dict[tuple[str, str], tuple[Owner | None, Skip | None]] = {}
        for pod, indexes in by_pod.items():
            alert = alerts[indexes[0]]
            if reader.past_deadline():
                resolved[pod] = None, _DEADLINE
            else:
                try:
                    if pod[0] in unlisted:
                        raise unlisted[pod[0]]
                    found = resolve_owner(reader, alert.namespace, alert.pod, self._owners)  # type: ignore[arg-type]
                    resolved[pod] = found, _owner_skip(alert, found, self.adapters)
                except UnknownPodLimit:
                    resolved[pod] = None, Skip(SkipReason.TOO_MANY_UNKNOWN_PODS, (
                        f"pod {alert.namespace}/{alert.pod} does not exist, and this notification already looked "
                        f"up {self.settings.server.max_unknown_pods} pods that do not (server.maxUnknownPods)"))
                except Exception as e:  # noqa: BLE001 - as in _decide_all: classified, and fails this pod's alerts only
                    resolved[pod] = None, self._failed(WorkloadRef("Pod", *pod), e, failures, counted=False)
            owner, skip = resolved[pod]
            if skip is not None:
                for i in indexes:
                    unresolved[i] = self.recorder.alert_skip(alerts[i], owner.ref if owner else None, skip)
                continue
            assert owner is not None
            groups.setdefault(owner.ref, (owner, []))[1].extend(indexes)
        for _owner, group in groups.values():
            group.sort()  # the alerts of a workload in the notification's order, as `fold` reads them
        return groups, unresolved

    def _decide_all(
        self,
        reader: Reader,
        alerts: Sequence[Alert],
        groups: dict[WorkloadRef, tuple[Owner, list[int]]],
        outcomes: dict[int, Outcome],
        now: datetime,
        applied: list[WorkloadRef],
        failures: list[str],
    ) -> None:
        namespaces: dict[str, _Namespace] = defaultdict(_Namespace)
        for ref in sorted(groups):
            owner, indexes = groups[ref]
            group = [alerts[i] for i in indexes]
            if reader.past_deadline():
                self.recorder.unfinished(ref, _DEADLINE, Result.SKIPPED, counted=SkipReason.DEADLINE_EXCEEDED)
                fields = decision_fields(ref, _DEADLINE, Result.SKIPPED)
                for i, alert in zip(indexes, group, strict=True):
                    outcomes[i] = alert_outcome(alert, fields)
                continue
            try:
                with self._workload_locks[hash(ref) % len(self._workload_locks)]:
                    decision, result = self._handle_workload(reader, owner, fold(group), namespaces[ref.namespace], now,
                                                             applied)
            except Exception as e:  # noqa: BLE001 - the isolation boundary: one workload's failure fails that workload
                decision, result = self._failed(ref, e, failures, counted=False), Result.FAILED
                # Kept-changing (409s) is counted; another retryable failure is counted as the 503 it causes.
                retry = decision.reason is SkipReason.API_ERROR and classify(e) is Failure.RETRY
                counted = SkipReason.CONFLICT if isinstance(e, KeptChanging) else None if retry else decision.reason
                self.recorder.unfinished(ref, decision, result, counted=counted)
            fields = decision_fields(ref, decision, result)  # once per workload; the alerts only add their own
            for i, alert in zip(indexes, group, strict=True):
                outcomes[i] = alert_outcome(alert, fields)

    # --- one workload -------------------------------------------------------------------

    def _handle_workload(
        self, reader: Reader, owner: Owner, signal: Signal, ns: _Namespace, now: datetime, applied: list[WorkloadRef],
        *, grow: Waiting | None = None,
    ) -> tuple[Decision, Result]:
        """`grow`: a rebalance's receiver, re-decided once its donor gave (no rebalance from here again)."""
        ref = owner.ref
        if signal.status == Status.FIRING and self._seen(signal.keys):
            # Another thread of this process acted on this firing while this one waited for the workload.
            return self._finish_skip(ref, signal, Skip(SkipReason.ALREADY_APPLIED, "this firing was already acted on"))
        assert owner.obj is not None
        receives = self._receives(signal)
        if grow is None and receives and signal.status == Status.FIRING:
            grow = self.rebalancer.waiting_for(ref)  # a repeat of the alert: the growth a donor already paid for
        attempt = Attempt(ref, signal, lambda obj: self._decide(reader, obj, owner, signal, ns, now),
                          self._rereader(reader, ref), **(self._receiving(grow) if grow is not None else {}))
        acted = self.actor.carry_out(attempt, owner.obj, now)
        if grow is not None:
            acted = self._grew(grow, acted, now)
        elif receives and signal.status == Status.FIRING and _quota_short(acted.decision):
            acted = self._rebalance(reader, owner, signal, acted.decision, ns, now, applied)  # type: ignore[arg-type]
        elif receives and signal.status == Status.RESOLVED:
            self._restore_after(reader, owner, now)
        return self._finish(ref, signal, acted, ns, applied)

    @staticmethod
    def _rereader(reader: Reader, ref: WorkloadRef) -> Callable[[], dict[str, Any] | None]:
        def reread() -> dict[str, Any] | None:
            reader.forget(ref.kind, ref.namespace, ref.name)
            return reader.get(ref.kind, ref.namespace, ref.name)
        return reread

    def _decide(
        self, reader: Reader, obj: dict[str, Any], owner: Owner, signal: Signal, ns: _Namespace, now: datetime,
        *, given_back: str | None = None,
    ) -> tuple[Workload, Decision, Mode]:
        """One call of the policy; the namespace facts are readers it calls only if a strategy needs them.
        `given_back`: the receiver's uid, to ask whether a rebalance's donor gets back what it gave instead."""
        ref = owner.ref
        workload = self._workload(obj, owner, reader)
        if self.ledger is not None:  # never memoized: the ledger moves on without the workload changing
            workload = self.ledger.judge(workload, now)

        def bounds() -> Bounds:
            if ns.bounds is None:
                ns.bounds = namespace_bounds(reader, ref.namespace, self.policy.gpu_resource)
            namespaced = ns.bounds.reserving(ns.reserved)
            if not workload.queue:
                return namespaced
            return self.view.queue_bounds(namespaced, workload, reader)

        def cpu_namespace_bounds() -> ComputeBounds:
            if ns.cpu_bounds is None:
                ns.cpu_bounds = cpu_bounds(reader, ref.namespace)
            return ns.cpu_bounds.reserving(ns.compute_reserved)

        def memory_namespace_bounds() -> ComputeBounds:
            if ns.memory_bounds is None:
                ns.memory_bounds = memory_bounds(reader, ref.namespace)
            return ns.memory_bounds.reserving(ns.compute_reserved)

        def hpa_managed() -> bool:
            return (ref.kind, ref.name) in hpa_targets(reader.list_objects("HorizontalPodAutoscaler", ref.namespace))

        classes = reader.workload_priority_classes if workload.queue else reader.priority_classes
        cpu = compute_facts(reader, ref.namespace, signal, bounds=cpu_namespace_bounds, memory=memory_namespace_bounds)
        if given_back is not None:
            decision = decide_given_back(signal, workload, bounds, self.policy, now, given_back,
                                         priority_classes=classes, hpa_managed=hpa_managed, cpu=cpu)
        else:
            decision = decide(signal, workload, bounds, self.policy, now, priority_classes=classes,
                              hpa_managed=hpa_managed, cpu=cpu)
        if isinstance(decision, Skip) and decision.reason is SkipReason.OPERATOR_FORBIDS:
            self._refusal_event(obj, workload, signal, decision, now)
        return workload, decision, effective_mode(workload, self.policy)

    def _refusal_event(self, obj: dict[str, Any], workload: Workload, signal: Signal, skip: Skip,
                       now: datetime) -> None:
        """A change the operator would refuse or never carry to a pod is said where its owners look: a Warning
        Event `OperatorForbids` on the resource, once per resource version and reason (a firing alert repeats
        every group interval; the Event does not). Never in dry run (`reactor plan` prints the refusal)."""
        if self.policy.dry_run or signal.status != Status.FIRING:
            return
        key = (workload.ref, workload.uid, workload.resource_version, skip.detail)
        with self._lock:
            if key in self._refusals:
                return
            self._refusals[key] = None
            while len(self._refusals) > WORKLOAD_MEMO:
                self._refusals.popitem(last=False)
        self.events.post(workload_event(workload.ref, obj, reason="OperatorForbids", warning=True, now=now,
                                        message=f"gpu-reactor: {signal.alert} not acted on: {skip.detail}"))

    # --- rebalancing (policy/rebalance.py; the waiting steps: observe/rebalancer.py) -----------------------

    def _receives(self, signal: Signal) -> bool:
        return self.policy.rebalance_enabled and signal.alert in self.policy.rebalance_receiver_alerts

    def _reader(self) -> Reader:
        """A Reader of its own for a step outside any notification (the rebalancer's pass), with the same bounds."""
        server = self.settings.server
        return Reader(self.kube, server.max_unknown_pods,
                      self.monotonic() + server.notification_deadline.total_seconds(), self.monotonic,
                      cache=self.cache, adapters=self.adapters)

    def _ns_bounds(self, reader: Reader, ns: _Namespace, namespace: str) -> Bounds:
        if ns.bounds is None:
            ns.bounds = namespace_bounds(reader, namespace, self.policy.gpu_resource)
        return ns.bounds.reserving(ns.reserved)

    def _rebalance(self, reader: Reader, owner: Owner, signal: Signal, skip: Skip, ns: _Namespace, now: datetime,
                   applied: list[WorkloadRef]) -> Acted:
        """The receiver's growth was refused for GPU quota only: find a donor, write its change first, then grow
        the receiver once the quota shows the room (now, if it already does; else the rebalancer waits for it)."""
        assert skip.shortfall is not None and owner.obj is not None
        shortfall, namespace = skip.shortfall, owner.ref.namespace
        receiver = self._workload(owner.obj, owner, reader)
        if effective_mode(receiver, self.policy) is not Mode.ENFORCE:
            return Acted(skip, Result.SKIPPED)  # a receiver only recommended on moves nobody's GPUs
        if self.firing is None:
            return self._unbalanced(skip, "no rebalance: no alert source shows idle donors "
                                          "(rebalance.alertmanagerUrl)", "source-unavailable")
        if self.rebalancer.full():
            return self._unbalanced(skip, "no rebalance: too many rebalances wait already", "no-donor")
        try:
            alerts = self.firing.firing(namespace, self.policy.rebalance_donor_alerts)
        except AlertSourceUnavailable as e:
            return self._unbalanced(skip, f"no rebalance: the alert source is unavailable: {e.reason}",
                                    "source-unavailable")
        verdicts, donors = self._candidates(reader, alerts, receiver, shortfall, ns, now)
        order = ranked(verdicts)
        if not order:
            return self._unbalanced(skip, no_donor(verdicts), "no-donor")
        considered = "; ".join(v.line() for v in verdicts)
        if self.policy.dry_run:  # `reactor plan`: the whole plan, both sides, and nothing written
            first = order[0]
            grows = next((c.strategy for c in skip.considered if c.shortfall == shortfall), "its growth")
            return Acted(replace(skip, detail=(
                f"{skip.detail}; rebalance plan: first {first.ref.kind}/{first.ref.name}: {first.reason}; then this "
                f"workload: {grows} once quota {shortfall.quota} shows the room; donors considered: {considered}")),
                Result.SKIPPED)
        lost: list[str] = []
        raced = False
        for verdict in order:
            donor_owner, donor_signal = donors[verdict.ref]
            acted = self._donate(reader, donor_owner, donor_signal, receiver, shortfall, verdict, ns, now)
            if acted.result is Result.APPLIED and isinstance(acted.decision, Action):
                break
            decision = acted.decision
            raced = raced or (isinstance(decision, Skip) and decision.reason in _TAKEN)
            why = f"{decision.reason.value}: {decision.detail}" if isinstance(decision, Skip) else acted.error
            lost.append(f"{verdict.ref.kind}/{verdict.ref.name}: {why}")
        else:
            return self._unbalanced(skip, "no donor gave: " + "; ".join(lost), "lost-race" if raced else "no-donor")
        self._finish_action(verdict.ref, donor_signal, acted.decision, Result.APPLIED)
        applied.append(verdict.ref)
        waiting = Waiting(GROW, owner.ref, receiver.uid, signal.pods[0] if signal.pods else "", signal, verdict.ref,
                          donor_signal.pods[0] if donor_signal.pods else "", donor_signal, verdict.freed,
                          shortfall.quota, now + self.policy.verify_timeout, now + 2 * self.policy.verify_timeout)
        if not reader.past_deadline():  # the quota may show the room already (pods deleted at once)
            grown = self._grow_now(owner, signal, waiting, now)
            if grown is not None:
                return grown
        self.rebalancer.add(waiting)
        self.metrics.rebalances.labels(result="pending").inc()
        note = (f"{verdict.ref.kind}/{verdict.ref.name} gave {verdict.freed} GPUs of quota {shortfall.quota} "
                f"({acted.decision.strategy} {acted.decision.from_value}→{acted.decision.to_value})")
        self.events.post(workload_event(owner.ref, owner.obj, reason="RebalancePending", now=now, message=(
            f"gpu-reactor: {signal.alert} refused by quota {shortfall.quota}: {note}; this workload grows once the "
            f"quota shows the room, or the donor gets its GPUs back after "
            f"{format_duration(self.policy.verify_timeout)}")))
        return Acted(replace(skip, detail=f"{skip.detail}; rebalance: {note}; the growth waits for the quota to show "
                                          f"the room (until {waiting.deadline.isoformat()})"), Result.SKIPPED)

    def _unbalanced(self, skip: Skip, why: str, result: str) -> Acted:
        self.metrics.rebalances.labels(result=result).inc()
        return Acted(replace(skip, detail=f"{skip.detail}; {why}"), Result.SKIPPED)

    def _candidates(self, reader: Reader, alerts: Sequence[Alert], receiver: Workload, shortfall: Shortfall,
                    ns: _Namespace, now: datetime) -> tuple[list[Verdict], dict[WorkloadRef, tuple[Owner, Signal]]]:
        """A verdict for each workload the source shows idle (its pods resolved through the notification's Reader,
        at most MAX_DONOR_PODS distinct pods), and each one's owner and folded idle signal."""
        namespace, names = receiver.ref.namespace, self.policy.rebalance_donor_alerts
        # Only what was asked for is believed, whatever the source answered: firing, this namespace, a donor alert.
        alerts = [a for a in alerts if a.firing and a.namespace == namespace and a.name in names]
        pods = sorted({a.pod for a in alerts if a.pod and valid_name(a.pod)})
        verdicts: list[Verdict] = []
        if len(pods) > MAX_DONOR_PODS:
            verdicts.append(Verdict(WorkloadRef("Pod", namespace, pods[MAX_DONOR_PODS]), False,
                                    f"and {len(pods) - MAX_DONOR_PODS} more idle pods not looked at (at most "
                                    f"{MAX_DONOR_PODS} per decision)"))
            pods = pods[:MAX_DONOR_PODS]
        groups: dict[WorkloadRef, tuple[Owner, list[Alert]]] = {}
        by_pod: dict[str, list[Alert]] = defaultdict(list)
        for alert in alerts:
            if alert.pod in pods:
                by_pod[alert.pod].append(alert)
        with contextlib.suppress(Exception):  # each pod is then read alone below, and fails alone
            reader.prime_pods(namespace, {p for p in pods if self._owners.get(namespace, p) is None})
        for pod in pods:
            try:
                found = resolve_owner(reader, namespace, pod, self._owners)
            except Exception as e:  # noqa: BLE001 - a donor not readable is a donor not chosen, said in its verdict
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False, f"not resolved: {e}"))
                continue
            refused = _owner_skip(by_pod[pod][0], found, self.adapters)
            if refused is not None or found is None:
                verdicts.append(Verdict(WorkloadRef("Pod", namespace, pod), False,
                                        refused.detail if refused is not None else "not found"))
                continue
            groups.setdefault(found.ref, (found, []))[1].extend(by_pod[pod])
        bounds = self._ns_bounds(reader, ns, namespace)
        donors: dict[WorkloadRef, tuple[Owner, Signal]] = {}
        for ref in sorted(groups):
            owner, group = groups[ref]
            assert owner.obj is not None
            signal = fold(group)
            workload, decision, mode = self._decide(reader, owner.obj, owner, signal, ns, now)
            candidate = Candidate(workload, signal, _labels(owner.obj), mode, decision)
            verdicts.append(qualify(candidate, receiver=receiver, shortfall=shortfall, bounds=bounds,
                                    policy=self.policy, now=now))
            donors[ref] = (owner, signal)
        return verdicts, donors

    def _donate(self, reader: Reader, owner: Owner, signal: Signal, receiver: Workload, shortfall: Shortfall,
                verdict: Verdict, ns: _Namespace, now: datetime) -> Acted:
        """The donor's own change, through the act step (conditional on what was read, its state sealed with the
        rebalance it gives to), qualified again on every re-read: a donor another receiver took meanwhile is in
        cooldown, or gives no more, and is refused."""
        ref = owner.ref
        assert owner.obj is not None
        record = Rebalance("donor", receiver.ref.kind, receiver.ref.name, receiver.uid, verdict.freed,
                           shortfall.quota, now)

        def decide_again(obj: dict[str, Any]) -> tuple[Workload, Decision, Mode]:
            workload, decision, mode = self._decide(reader, obj, owner, signal, ns, now)
            if isinstance(decision, Action):
                again = qualify(Candidate(workload, signal, _labels(obj), mode, decision), receiver=receiver,
                                shortfall=shortfall, bounds=self._ns_bounds(reader, ns, ref.namespace),
                                policy=self.policy, now=now)
                if not again.qualifies:
                    return workload, Skip(SkipReason.CONFLICT, f"no longer gives: {again.reason}"), mode
            return workload, decision, mode

        attempt = Attempt(ref, signal, decide_again, self._rereader(reader, ref), rebalance=record,
                          event_reason="RebalanceDonated",
                          event_note=(f"; rebalance: gives {verdict.freed} GPUs of quota {shortfall.quota} to "
                                      f"{receiver.ref.kind}/{receiver.ref.name}"))
        with self._other_lock(ref, held=receiver.ref) as locked:
            if not locked:
                return Acted(Skip(SkipReason.CONFLICT, "another decision holds the donor"), Result.SKIPPED)
            return self.actor.carry_out(attempt, owner.obj, now)

    @contextlib.contextmanager
    def _other_lock(self, ref: WorkloadRef, *, held: WorkloadRef | None) -> Iterator[bool]:
        """The workload lock of `ref` while this thread holds `held`'s: only tried, for a bounded time (two
        receivers taking each other's donors must never wait on each other), and not taken again when it is the
        same stripe. Yields whether this thread may go on; the write stays conditional either way."""
        lock = self._workload_locks[hash(ref) % len(self._workload_locks)]
        if held is not None and lock is self._workload_locks[hash(held) % len(self._workload_locks)]:
            yield True
            return
        if not lock.acquire(timeout=2.0 if held is not None else -1):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def _receiving(self, waiting: Waiting) -> dict[str, Any]:
        """The receiver's side of a rebalance, written with its growth."""
        record = Rebalance("receiver", waiting.donor.kind, waiting.donor.name, self._donor_uid(waiting), waiting.gpus,
                           waiting.quota, self.clock())
        return {"rebalance": record, "event_reason": "RebalanceReceived",
                "event_note": f"; rebalance: {waiting.gpus} GPUs of quota {waiting.quota} given by "
                              f"{waiting.donor.kind}/{waiting.donor.name}"}

    def _donor_uid(self, waiting: Waiting) -> str:
        try:
            obj = self.kube.get(waiting.donor.kind, waiting.donor.namespace, waiting.donor.name,
                                self.adapters.get(waiting.donor.kind))
        except Exception:  # noqa: BLE001 - the record names the donor by kind and name then
            return ""
        return str((obj.get("metadata") or {}).get("uid", ""))

    def _grew(self, waiting: Waiting, acted: Acted, now: datetime) -> Acted:
        """A waiting growth decided again: applied ends the rebalance (moved)."""
        if acted.result is Result.APPLIED:
            self.rebalancer.discard(waiting)
            with self._lock:
                self._grow_refusals.pop(waiting.key, None)
            self.metrics.rebalances.labels(result="moved").inc()
            self.metrics.rebalance_gpus_moved.inc(waiting.gpus)
        elif isinstance(acted.decision, Skip) and acted.decision.reason is SkipReason.QUOTA_EXCEEDED:
            return Acted(replace(acted.decision, detail=(
                f"{acted.decision.detail}; rebalance: {waiting.donor.kind}/{waiting.donor.name} gave {waiting.gpus} "
                f"GPUs; the growth waits for the quota to show the room (until {waiting.deadline.isoformat()})")),
                acted.result)
        return acted

    def _grow_now(self, owner: Owner, signal: Signal, waiting: Waiting, now: datetime) -> Acted | None:
        """Right after the donor's write: the receiver decided again on the quota read now (a fresh Reader, so
        the API server's status.used, not the one read before the donor's change). None while it shows no room."""
        reader = self._reader()
        obj = reader.get(owner.ref.kind, owner.ref.namespace, owner.ref.name)
        if obj is None:
            return None
        fresh = replace(owner, obj=obj)
        ns = _Namespace()
        attempt = Attempt(owner.ref, signal, lambda o: self._decide(reader, o, fresh, signal, ns, now),
                          self._rereader(reader, owner.ref), **self._receiving(waiting))
        acted = self.actor.carry_out(attempt, obj, now)
        if acted.result is not Result.APPLIED:
            return None
        self.metrics.rebalances.labels(result="moved").inc()
        self.metrics.rebalance_gpus_moved.inc(waiting.gpus)
        return acted

    def _step_owner(self, reader: Reader, ref: WorkloadRef, pod: str, uid: str) -> Owner | None:
        """The workload a waiting step names, read now: through its pod, as a notification resolves it (an
        operator's resource needs its template part), else by name; None when it is gone or is another object."""
        owner = resolve_owner(reader, ref.namespace, pod, self._owners) if pod else None
        if owner is None or owner.ref != ref or owner.obj is None:
            obj = reader.get(ref.kind, ref.namespace, ref.name)
            owner = Owner(ref, obj) if obj is not None else None
        if owner is None or owner.obj is None:
            return None
        if uid and str((owner.obj.get("metadata") or {}).get("uid", "")) != uid:
            return None
        return owner

    def _grow_step(self, waiting: Waiting, now: datetime) -> bool:
        """The rebalancer's pass for a waiting receiver: decide it again (every rail), apply when the quota fits."""
        reader = self._reader()
        owner = self._step_owner(reader, waiting.receiver, waiting.receiver_pod, waiting.receiver_uid)
        if owner is None:
            return self._give_back_step(waiting, now)  # the receiver is gone: nothing waits for the donor's GPUs
        applied: list[WorkloadRef] = []
        with self._workload_locks[hash(owner.ref) % len(self._workload_locks)]:
            decision, result = self._handle_workload(reader, owner, waiting.receiver_signal, _Namespace(), now,
                                                     applied, grow=waiting)
        if applied and self.on_applied is not None:
            self.on_applied(applied)
        if isinstance(decision, Skip):  # said with the give-back, if it comes to that
            with self._lock:
                self._grow_refusals[waiting.key] = f"{decision.reason.value}: {decision.detail}"[:300]
        return result is Result.APPLIED

    def _give_back_step(self, waiting: Waiting, now: datetime) -> bool:
        """The receiver could not grow by the deadline: the donor gets back what it gave."""
        with self._lock:
            last = self._grow_refusals.get(waiting.key, f"quota {waiting.quota} showed no room")
        done = self._return_to_donor(waiting, now, "RebalanceGivenBack", "given-back",
                                     f"{waiting.receiver.kind}/{waiting.receiver.name} could not grow within "
                                     f"{format_duration(self.policy.verify_timeout)} ({last})")
        if done:
            with self._lock:
                self._grow_refusals.pop(waiting.key, None)
        return done

    def _restore_step(self, waiting: Waiting, now: datetime, held: WorkloadRef | None = None) -> bool:
        return self._return_to_donor(waiting, now, "RebalanceRestored", "restored",
                                     f"{waiting.receiver.kind}/{waiting.receiver.name}'s saturation resolved", held)

    def _restore_expired(self, waiting: Waiting, now: datetime) -> None:
        with self._lock:
            self._grow_refusals.pop(waiting.key, None)
        self.metrics.rebalances.labels(result="not-restored").inc()
        log.warning("rebalance: the donor was not given back its GPUs in time", extra={
            "workload": str(waiting.donor), "receiver": str(waiting.receiver), "quota": waiting.quota})

    def _return_to_donor(self, waiting: Waiting, now: datetime, reason: str, result: str, why: str,
                         held: WorkloadRef | None = None) -> bool:
        """The donor's give-back through the act step (`decide_given_back`: its rebalance record for this
        receiver, the rollout, mode, bounds and quota rails). True when done, or when nothing is left to give.
        `held`: the workload whose lock this thread holds (the receiver, in its resolve's notification)."""
        reader = self._reader()
        owner = self._step_owner(reader, waiting.donor, waiting.donor_pod, "")
        if owner is None:
            return True
        ref, ns = owner.ref, _Namespace()
        signal = Signal(alert="RebalanceGiveBack", status=Status.RESOLVED, keys=(), container=None, value=None,
                        fingerprint=f"rebalance-{waiting.receiver_uid[:16] or 'receiver'}", starts_at=now.isoformat())
        uid = waiting.receiver_uid
        attempt = Attempt(ref, signal, lambda obj: self._decide(reader, obj, owner, signal, ns, now, given_back=uid),
                          self._rereader(reader, ref), rebalance=None, event_reason=reason,
                          event_note=f"; rebalance: {why}")
        with self._other_lock(ref, held=held) as locked:
            if not locked:
                return False  # tried again at the next pass
            acted = self.actor.carry_out(attempt, owner.obj, now)  # type: ignore[arg-type]
        if acted.result is Result.APPLIED:
            self.metrics.rebalances.labels(result=result).inc()
            self.recorder.action(ref, signal, acted.decision, Result.APPLIED)  # type: ignore[arg-type]
            log.info("rebalance: the donor got back what it gave", extra={"workload": str(ref), "reason": why})
            return True
        decision = acted.decision
        over = isinstance(decision, Skip) and decision.reason in (SkipReason.NOTHING_TO_REVERT,
                                                                  SkipReason.CHANGED_SINCE, SkipReason.MODE_OFF)
        if over and isinstance(decision, Skip):
            log.info("rebalance: nothing to give back", extra={"workload": str(ref), "reason": decision.detail})
        return over

    def _restore_after(self, reader: Reader, owner: Owner, now: datetime) -> None:
        """The receiver's saturation resolved: the donor its sealed record names gets back what it gave, once the
        quota shows room for it (tried now, then by the rebalancer until `verify.timeout`)."""
        assert owner.obj is not None
        if self.policy.dry_run:
            return
        receiver = self._workload(owner.obj, owner, reader)
        record = receiver.state.rebalance
        grow = self.rebalancer.waiting_for(owner.ref)
        empty = Signal(alert="", status=Status.RESOLVED, keys=(), container=None, value=None)
        if grow is not None:  # resolved before it grew: it no longer needs what the donor gave
            self.rebalancer.discard(grow)
            donor, pod, gpus, quota = grow.donor, grow.donor_pod, grow.gpus, grow.quota
        elif record is not None and record.role == "receiver":
            donor, pod, gpus, quota = WorkloadRef(record.kind, owner.ref.namespace, record.name), "", record.gpus, \
                record.quota
        else:
            return
        waiting = Waiting(RESTORE, owner.ref, receiver.uid, "", empty, donor, pod, empty, gpus, quota,
                          now + self.policy.verify_timeout)
        if not self._restore_step(waiting, now, held=owner.ref):
            self.rebalancer.add(waiting)

    # --- recording ----------------------------------------------------------------------

    def _finish(self, ref: WorkloadRef, signal: Signal, acted: Acted, ns: _Namespace,
                applied: list[WorkloadRef]) -> tuple[Decision, Result]:
        decision = acted.decision
        if isinstance(decision, Skip):
            return self._finish_skip(ref, signal, decision)
        if acted.result is Result.FAILED:
            self.recorder.action(ref, signal, decision, Result.FAILED, acted.error)
            return Skip(SkipReason.API_ERROR, acted.error), Result.FAILED
        if acted.result is Result.APPLIED:
            ns.reserve(decision)
            if decision.action != "revert":
                applied.append(ref)  # to verify: handed to `on_applied` with the notification's others
        return self._finish_action(ref, signal, decision, acted.result)

    def _workload(self, obj: dict[str, Any], owner: Owner, reader: Reader) -> Workload:
        """The workload as the policy sees it (its state authenticated), remembered by resourceVersion.

        The API server gives each version of an object its own resourceVersion, so the same (workload, uid,
        resourceVersion) always reads the same: on the cooldown path, where every notification meets an
        unchanged workload, neither the object is read again nor its state's MAC recomputed. An operator's
        resource (read through its adapter and child) and an object without a version are read every time.
        """
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version or owner.child is not None or self.adapters.get(owner.ref.kind) is not None:
            return self._view(obj, owner, reader)
        generation = self.state_keys.generation if self.state_keys is not None else -1  # a verdict dies with its key
        key = (owner.ref, str(meta.get("uid", "")), str(version), owner.via, owner.part, generation)
        with self._lock:
            known = self._workloads.get(key)
            if known is not None:
                self._workloads.move_to_end(key)
                return known
        workload = self._view(obj, owner, reader)
        with self._lock:
            self._workloads[key] = workload
            while len(self._workloads) > WORKLOAD_MEMO:
                self._workloads.popitem(last=False)
        return workload

    def _view(self, obj: dict[str, Any], owner: Owner, reader: Reader) -> Workload:
        return self.view.workload(obj, owner.ref.kind, part=owner.part, child=owner.child, via=owner.via,
                                  kueue_label_mutable=reader.kueue_label_mutable)

    def _failed(self, ref: WorkloadRef, error: Exception, failures: list[str], *, counted: bool) -> Skip:
        """The outcome of a pod or workload that failed, by the one classification of failures (`classify`).

        Retry (the API server or the network failed this time, whatever the verb): `api-error` saying so, and a line in
        `failures`, which makes the notification a 503 once every other workload is handled. Refused (403, 404, 422):
        `api-error` naming the refusal, answered 200. Internal (the workload's own data, a bug): `internal-error`,
        logged with its traceback, answered 200 — a retry would meet the same data. `counted`: count the skip here
        (the resolve step's skips are counted where their outcomes are recorded).
        """
        failure = classify(error)
        if failure is Failure.RETRY:
            failures.append(f"{ref}: {error}")  # logged once for the notification, with the 503 (intake/web.py)
            skip = Skip(SkipReason.API_ERROR, f"temporary failure, the notification is answered 503 so that "
                                              f"Alertmanager retries: {error}")
        elif failure is Failure.REFUSED:
            # E.g. RBAC refuses a read: answer it for this pod or workload, go on with the others.
            log.warning("workload not handled", extra={"workload": str(ref), "error": str(error)})
            skip = Skip(SkipReason.API_ERROR, str(error))
        else:
            skip = self._internal_error(ref, error)
        if counted and failure is not Failure.RETRY:  # a retry's failure is counted as the 503 it causes
            self.metrics.workload_skips.labels(reason=skip.reason.value).inc()
        return skip

    def _internal_error(self, ref: WorkloadRef, error: Exception) -> Skip:
        """An unexpected error (a bug, a value nobody foresaw): logged with its traceback, answered as a Skip."""
        log.error("workload failed", exc_info=error, extra={"workload": str(ref), "error": repr(error)[:500]})
        return Skip(SkipReason.INTERNAL_ERROR, f"unexpected {type(error).__name__} while deciding {ref} (see the log)")

    def _finish_skip(self, ref: WorkloadRef, signal: Signal, skip: Skip) -> tuple[Skip, Result]:
        self.recorder.skip(ref, signal, skip)
        if skip.reason is SkipReason.ALREADY_APPLIED:
            self._remember(signal.keys)
        return skip, Result.SKIPPED

    def _finish_action(self, ref: WorkloadRef, signal: Signal, action: Action, result: Result) -> tuple[Action, Result]:
        self.recorder.action(ref, signal, action, result)
        if result is Result.APPLIED and signal.status == Status.FIRING:
            self._remember(signal.keys)
        return action, result

    def _seen(self, keys: Sequence[tuple[str, str]]) -> bool:
        with self._lock:
            return any(key in self._applied for key in keys)

    def _remember(self, keys: Sequence[tuple[str, str]]) -> None:
        with self._lock:
            for key in keys:
                self._applied[key] = None
                self._applied.move_to_end(key)
            while len(self._applied) > DEDUP_SIZE:
                self._applied.popitem(last=False)


def _owner_skip(alert: Alert, owner: Owner | None, adapters: Adapters) -> Skip | None:
    if owner is None:
        return Skip(SkipReason.NOT_FOUND, f"pod {alert.namespace}/{alert.pod} does not exist (replaced or deleted)")
    if owner.unverified:
        return Skip(SkipReason.OWNER_UNVERIFIED, owner.unverified)
    adapter = adapters.get(owner.ref.kind)
    if adapter is not None and owner.obj is not None:
        return adapted_refusal(adapter, owner)
    refused = owner_refusal(owner.ref.kind, owner.ref.name)
    if (refused is None or adapter is not None) and owner.obj is None:
        return Skip(SkipReason.UNSUPPORTED_OWNER, f"owned by {owner.ref.kind} {owner.ref.name}, which is being deleted")
    return refused


# What a donor another receiver took meanwhile answers when asked again (its write conditional, its change recorded).
_TAKEN = frozenset({SkipReason.CONFLICT, SkipReason.COOLDOWN, SkipReason.ALREADY_APPLIED, SkipReason.HYSTERESIS,
                    SkipReason.ROLLOUT_IN_PROGRESS})


def _quota_short(decision: Decision) -> bool:
    """Refused for lack of GPU quota only: the one refusal a rebalance answers."""
    return (isinstance(decision, Skip) and decision.reason is SkipReason.QUOTA_EXCEEDED
            and decision.shortfall is not None and decision.shortfall.gpus > 0)


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _alertname(alert: Alert) -> str:
    """Metric label: known names (and the doctor's test alert) as they are, anything else folded so series stay
    bounded."""
    return alert.name if alert.name in KNOWN_ALERTS or alert.name == TEST_ALERT else "other"
