"""One notification in, one outcome per alert out: screen → resolve → decide → act → record.

Alerts on the same workload are folded into one signal and get one decision and at most one
write. Reads are shared through the notification's `Reader`. Failures are classified once
(`core.errors.classify`): one a retry can fix, met while resolving a pod or deciding a workload,
does not stop the others; it is raised at the end (`RetryLater`, with every outcome) so the webhook
answers 503 and Alertmanager retries (idempotence makes the retry safe). One a retry cannot fix
fails that pod's or workload's alerts only, answered 200.


Rebalancing, when on, is the `Rebalancing` steps (rebalancing.py) this engine is made of.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from reactor.act.actor import Acted, Actor, Attempt, KeptChanging
from reactor.act.budget import GLOBAL, Budget
from reactor.act.ledger import Ledger, MemoryLedger
from reactor.act.posting import EventPoster, workload_event
from reactor.act.recording import Recorder
from reactor.act.resize import compute_facts, cpu_bounds, memory_bounds
from reactor.cluster.cache import Store
from reactor.cluster.kube import KubeGateway
from reactor.cluster.view import ClusterView
from reactor.cluster.workloads import hpa_targets
from reactor.config.settings import Settings
from reactor.core.confirm import Confirmer
from reactor.core.errors import Failure, RetryLater, classify
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
    Result,
    Signal,
    Skip,
    SkipReason,
    Status,
    Workload,
    WorkloadRef,
)
from reactor.core.outcome import Outcome, alert_outcome, decision_fields
from reactor.engine.namespace import Namespace
from reactor.engine.rebalancing import Rebalancing, quota_short
from reactor.engine.refusals import DEADLINE, owner_skip
from reactor.observe.rebalancer import Rebalancer, Waiting
from reactor.policy import alert_refusal, decide, decide_given_back, effective_mode, fold
from reactor.resolve.owners import Owner, Owners, Reader, UnknownPodLimit, resolve_owner, valid_name, valid_namespace
from reactor.state.seal import StateKeys
from reactor.state.writes import StateWrites

log = logging.getLogger(__name__)

DEDUP_SIZE = 10_000
WORKLOAD_MEMO = 1024  # workloads remembered as read, by resourceVersion (see Engine._workload)
WORKLOAD_LOCKS = 64
def utcnow() -> datetime:
    return datetime.now(UTC)


class Engine(Rebalancing):
    """Handles notifications; safe to call from several threads at once."""

    def __init__(
        self, *, settings: Settings, kube: KubeGateway, metrics: Metrics,
        budget: Budget | None = None, clock: Callable[[], datetime] = utcnow, state_keys: StateKeys | None = None,
        monotonic: Callable[[], float] = time.monotonic, cache: Store | None = None,
        events: EventPoster | None = None, ledger: Ledger | None = None, firing: FiringAlerts | None = None,
        confirm: Confirmer | None = None,
    ) -> None:
        self.monotonic = monotonic
        self.cache = cache  # the watch-fed store (reactor/cluster/cache.py) the notification's Reader reads first
        if state_keys is None and not settings.policy.dry_run:
            raise ValueError("an Engine that may write needs state keys (see statemac.load_state_keys)")
        self.state_keys = state_keys
        # The latest write per workload (state/ledger_codec.py): in this process unless the assembly gives a Lease.
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
        # Prometheus's word on each alert before any write (core/confirm.py); None only with `confirm.enabled: false`.
        self.confirm = confirm
        self._grow_refusals: dict[tuple[str, WorkloadRef, WorkloadRef], str] = {}  # a waiting growth's last refusal
        self.rebalancer = Rebalancer(interval=self.policy.verify_interval, clock=clock, grow=self._grow_step,
                                     give_back=self._give_back_step, restore=self._restore_step,
                                     expired=self._restore_expired, recover=self._orphaned_donors)
        self._orphans_given_up: set[tuple[WorkloadRef, str, datetime]] = set()  # see `_orphaned_donors`

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
        alerts, pending = self._confirm(alerts, pending, outcomes, now)
        reader = self._reader()
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

    # --- confirm: Prometheus's word before any write (a delimited step: core/confirm.py) ---

    def _confirm(self, alerts: tuple[Alert, ...], pending: list[int], outcomes: dict[int, Outcome],
                 now: datetime) -> tuple[tuple[Alert, ...], list[int]]:
        """The alerts that passed screening, asked of Prometheus in one request: a firing alert its rules do not fire
        now is `unconfirmed`, a resolve they still fire is `still-firing` (nothing reverted); a confirmed firing alert
        is sized by Prometheus's measurement (`Confirmation.measured`), its annotations kept for the answer and logs.
        `PrometheusUnavailable` is raised: nothing is written, the webhook answers 503 and Alertmanager retries."""
        if self.confirm is None or not pending:
            return alerts, pending
        verdicts = self.confirm.confirm([alerts[i] for i in pending], now)
        measured = list(alerts)
        kept: list[int] = []
        for i, verdict in zip(pending, verdicts, strict=True):
            alert = alerts[i]
            if alert.firing != verdict.firing:
                reason = SkipReason.UNCONFIRMED if alert.firing else SkipReason.STILL_FIRING
                if alert.firing:
                    log.warning("alert not confirmed by Prometheus: not acted on",
                                extra={"alert": alert.name, "namespace": alert.namespace, "pod": alert.pod,
                                       "claimed_value": alert.annotations.get("value"), "detail": verdict.reason})
                outcomes[i] = self.recorder.alert_skip(alert, None, Skip(reason, verdict.reason))
                continue
            if alert.firing:
                measured[i] = verdict.measured(alert)
            kept.append(i)
        return tuple(measured), kept

    def _reader(self) -> Reader:
        """The reads of one notification (or of one rebalancer step): shared, bounded by its deadline."""
        server = self.settings.server
        return Reader(self.kube, server.max_unknown_pods,
                      self.monotonic() + server.notification_deadline.total_seconds(), self.monotonic,
                      cache=self.cache, adapters=self.adapters)

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
                resolved[pod] = None, DEADLINE
            else:
                try:
                    if pod[0] in unlisted:
                        raise unlisted[pod[0]]
                    found = resolve_owner(reader, alert.namespace, alert.pod, self._owners)  # type: ignore[arg-type]
                    resolved[pod] = found, owner_skip(alert, found, self.adapters)
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
        namespaces: dict[str, Namespace] = defaultdict(Namespace)
        for ref in sorted(groups):
            owner, indexes = groups[ref]
            group = [alerts[i] for i in indexes]
            if reader.past_deadline():
                self.recorder.unfinished(ref, DEADLINE, Result.SKIPPED, counted=SkipReason.DEADLINE_EXCEEDED)
                fields = decision_fields(ref, DEADLINE, Result.SKIPPED)
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
        self, reader: Reader, owner: Owner, signal: Signal, ns: Namespace, now: datetime, applied: list[WorkloadRef],
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
        elif receives and signal.status == Status.FIRING and quota_short(acted.decision):
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
        self, reader: Reader, obj: dict[str, Any], owner: Owner, signal: Signal, ns: Namespace, now: datetime,
        *, given_back: str | None = None,
    ) -> tuple[Workload, Decision, Mode]:
        """One call of the policy; the namespace facts are readers it calls only if a strategy needs them.
        `given_back`: the receiver's uid, to ask whether a rebalance's donor gets back what it gave instead."""
        ref = owner.ref
        workload = self._workload(obj, owner, reader)
        if self.ledger is not None:  # never memoized: the ledger moves on without the workload changing
            workload = self.ledger.judge(workload, now)

        def bounds() -> Bounds:
            namespaced = ns.gpu_bounds(reader, ref.namespace, self.policy.gpu_resource)
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

    # --- recording ----------------------------------------------------------------------

    def _finish(self, ref: WorkloadRef, signal: Signal, acted: Acted, ns: Namespace,
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
        self.recorder.action(ref, signal, action, result, action.note)
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


def _alertname(alert: Alert) -> str:
    """Metric label: known names (and the doctor's test alert) as they are, anything else folded so series stay
    bounded."""
    return alert.name if alert.name in KNOWN_ALERTS or alert.name == TEST_ALERT else "other"
