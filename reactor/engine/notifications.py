"""One notification in, one outcome per alert out: screen → resolve → group → decide each workload → answer.

Alerts on the same workload are folded into one signal and get one decision and at most one write. Reads are
shared through the notification's `Reader`. Failures are classified once (`core.errors.classify`): one a retry
can fix, met while resolving a pod or deciding a workload, does not stop the others; it is raised at the end
(`RetryLater`, with every outcome) so the webhook answers 503 and Alertmanager retries (idempotence makes the
retry safe). One a retry cannot fix fails that pod's or workload's alerts only, answered 200.

Each workload is decided by the `WorkloadDecider` (decider.py), or, for an alert that can receive a rebalance,
by `Rebalancing` (rebalancing.py), which wraps the decider's steps.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime

from reactor.act.actor import KeptChanging
from reactor.act.recording import Recorder
from reactor.config.settings import Settings
from reactor.core.confirm import Confirmer
from reactor.core.errors import Failure, RetryLater, classify
from reactor.core.metrics import Metrics
from reactor.core.model import (
    KNOWN_ALERTS,
    TEST_ALERT,
    Alert,
    Decision,
    Notification,
    Result,
    Skip,
    SkipReason,
    WorkloadRef,
)
from reactor.core.outcome import Outcome, alert_outcome, decision_fields
from reactor.engine.decider import ALREADY_APPLIED, WorkloadDecider
from reactor.engine.firings import Firings, WorkloadLocks
from reactor.engine.metrics import EngineMetrics
from reactor.engine.namespace import Namespace
from reactor.engine.reads import Readers
from reactor.engine.rebalancing import Rebalancing
from reactor.engine.refusals import DEADLINE, owner_skip
from reactor.policy import alert_refusal, fold
from reactor.resolve.owners import Owner, Owners, Reader, UnknownPodLimit, resolve_owner, valid_name, valid_namespace

log = logging.getLogger(__name__)

Groups = dict[WorkloadRef, tuple[Owner, list[int]]]  # each workload's owner and its alerts' indexes


class NotificationHandler:
    """Handles notifications; safe to call from several threads at once."""

    def __init__(self, *, settings: Settings, metrics: Metrics, recorder: Recorder, readers: Readers,
                 owners: Owners, firings: Firings, locks: WorkloadLocks, decider: WorkloadDecider,
                 rebalancing: Rebalancing | None, clock: Callable[[], datetime], confirm: Confirmer | None = None,
                 on_applied: Callable[[list[WorkloadRef]], None] | None = None) -> None:
        self.settings, self.policy, self.adapters = settings, settings.policy, settings.adapters
        self.metrics, self.recorder, self.readers, self.owners = metrics, recorder, readers, owners
        self.counts = EngineMetrics.of(metrics)
        self.firings, self.locks, self.decider, self.rebalancing = firings, locks, decider, rebalancing
        self.clock = clock
        # Prometheus's word on each alert before any write (core/confirm.py); None only with `confirm.enabled: false`.
        self.confirm = confirm
        # The verifier's `track`, when one runs: called once per notification with every change it applied.
        self.on_applied = on_applied

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
            self.metrics.child(self.counts.alerts_received, name, status).inc(count)
        if notification.truncated_alerts:
            self._truncated(notification)
        alerts, pending = self._confirm(alerts, pending, outcomes, now)
        reader = self.readers.new()
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

    def _truncated(self, notification: Notification) -> None:
        """Alertmanager left alerts out (the receiver's max_alerts): they reach nobody, so someone is told."""
        self.counts.alerts_truncated.inc(notification.truncated_alerts)
        log.warning("Alertmanager truncated the notification: alerts left out were not seen",
                    extra={"truncated": notification.truncated_alerts, "alerts": len(notification.alerts),
                           "group_key": notification.group_key[:200], "receiver": notification.receiver[:100]})

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
        cluster = alert.labels.get("cluster") if self.policy.cluster is not None else None
        if cluster is not None and cluster != self.policy.cluster:
            # A central Alertmanager can misroute, and the same namespace/pod names exist in every cluster.
            return Skip(SkipReason.OTHER_CLUSTER,
                        f"the alert is for cluster {cluster!r}, this is {self.policy.cluster!r}")
        target = (alert.namespace, alert.pod)
        if target not in targets:
            targets[target] = self._target_skip(alert.namespace, alert.pod)
        skip = targets[target]
        if skip is not None:
            return skip
        if alert.firing and self.firings.seen((alert.key,)):
            return ALREADY_APPLIED
        return None

    def _known_workload(self, alert: Alert, skip: Skip) -> WorkloadRef | None:
        """The workload a repeat was resolved to before (no API call), so its answer names it like the first did."""
        if skip.reason is not SkipReason.ALREADY_APPLIED or not alert.namespace or not alert.pod:
            return None
        known = self.owners.get(alert.namespace, alert.pod)
        return known[0] if known else None

    def _target_skip(self, namespace: str | None, pod: str | None) -> Skip | None:
        if not namespace or not pod:
            return Skip(SkipReason.NO_TARGET, "the alert has no namespace/pod (or exported_*) label")
        if not valid_namespace(namespace) or not valid_name(pod):
            return Skip(SkipReason.NO_TARGET, "namespace or pod label is not a valid Kubernetes name")
        if not self.policy.namespace_allowed(namespace):
            return Skip(SkipReason.NAMESPACE_NOT_ALLOWED, f"namespace {namespace!r} is not in the allow list")
        return None

    def _resolve(self, reader: Reader, alerts: Sequence[Alert], pending: list[int],
                 failures: list[str]) -> tuple[Groups, dict[int, Outcome]]:
        by_pod: dict[tuple[str, str], list[int]] = {}  # the alerts of each pod, in order: one resolve per pod
        for i in pending:
            alert = alerts[i]
            by_pod.setdefault((alert.namespace, alert.pod), []).append(i)  # type: ignore[arg-type]
        by_namespace: dict[str, set[str]] = defaultdict(set)
        for namespace, pod_name in by_pod:
            by_namespace[namespace].add(pod_name)
        unlisted: dict[str, Exception] = {}  # namespaces whose pod LIST failed: their pods' alerts fail alike
        for namespace, pods in by_namespace.items():
            try:
                reader.prime_pods(namespace, {p for p in pods if self.owners.get(namespace, p) is None})
            except Exception as e:  # noqa: BLE001 - classified per pod below, like a failed GET of the pod
                unlisted[namespace] = e
        groups: Groups = {}
        unresolved: dict[int, Outcome] = {}
        for pod, indexes in by_pod.items():
            owner, skip = self._owner(reader, alerts[indexes[0]], unlisted.get(pod[0]), failures)
            if skip is not None:
                for i in indexes:
                    unresolved[i] = self.recorder.alert_skip(alerts[i], owner.ref if owner else None, skip)
                continue
            assert owner is not None
            groups.setdefault(owner.ref, (owner, []))[1].extend(indexes)
        for _owner, group in groups.values():
            group.sort()  # the alerts of a workload in the notification's order, as `fold` reads them
        return groups, unresolved

    def _owner(self, reader: Reader, alert: Alert, unlisted: Exception | None,
               failures: list[str]) -> tuple[Owner | None, Skip | None]:
        """The workload that owns the alert's pod, or why it cannot be acted on."""
        if reader.past_deadline():
            return None, DEADLINE
        namespace, pod = alert.namespace, alert.pod
        assert namespace is not None and pod is not None
        try:
            if unlisted is not None:
                raise unlisted
            found = resolve_owner(reader, namespace, pod, self.owners)
            return found, owner_skip(alert, found, self.adapters)
        except UnknownPodLimit:
            return None, Skip(SkipReason.TOO_MANY_UNKNOWN_PODS, (
                f"pod {namespace}/{pod} does not exist, and this notification already looked up "
                f"{self.settings.server.max_unknown_pods} pods that do not (server.maxUnknownPods)"))
        except Exception as e:  # noqa: BLE001 - as in _decide_all: classified, and fails this pod's alerts only
            return None, self._failed(WorkloadRef("Pod", namespace, pod), e, failures)

    def _decide_all(self, reader: Reader, alerts: Sequence[Alert], groups: Groups, outcomes: dict[int, Outcome],
                    now: datetime, applied: list[WorkloadRef], failures: list[str]) -> None:
        namespaces: dict[str, Namespace] = defaultdict(Namespace)
        for ref in sorted(groups):
            owner, indexes = groups[ref]
            group = [alerts[i] for i in indexes]
            if reader.past_deadline():
                self.recorder.unfinished(ref, DEADLINE, Result.SKIPPED, counted=SkipReason.DEADLINE_EXCEEDED)
                decision: Decision = DEADLINE
                result = Result.SKIPPED
            else:
                decision, result = self._workload(reader, owner, group, namespaces[ref.namespace], now, applied,
                                                  failures)
            fields = decision_fields(ref, decision, result)  # once per workload; the alerts only add their own
            for i, alert in zip(indexes, group, strict=True):
                outcomes[i] = alert_outcome(alert, fields)

    def _workload(self, reader: Reader, owner: Owner, group: list[Alert], ns: Namespace, now: datetime,
                  applied: list[WorkloadRef], failures: list[str]) -> tuple[Decision, Result]:
        """One workload's decision, isolated: its failure fails its own alerts only."""
        ref, signal = owner.ref, fold(group)
        try:
            with self.locks.of(ref):
                if self.rebalancing is not None and self.rebalancing.receives(signal):
                    return self.rebalancing.handle(reader, owner, signal, ns, now, applied)
                return self.decider.handle(reader, owner, signal, ns, now, applied)
        except Exception as e:  # noqa: BLE001 - the isolation boundary: one workload's failure fails that workload
            skip = self._failed(ref, e, failures)
            # Kept-changing (409s) is counted; another retryable failure is counted as the 503 it causes.
            retry = skip.reason is SkipReason.API_ERROR and classify(e) is Failure.RETRY
            counted = SkipReason.CONFLICT if isinstance(e, KeptChanging) else None if retry else skip.reason
            self.recorder.unfinished(ref, skip, Result.FAILED, counted=counted)
            return skip, Result.FAILED

    def _failed(self, ref: WorkloadRef, error: Exception, failures: list[str]) -> Skip:
        """The outcome of a pod or workload that failed, by the one classification of failures (`classify`).

        Retry (the API server or the network failed this time, whatever the verb): `api-error` saying so, and a line in
        `failures`, which makes the notification a 503 once every other workload is handled. Refused (403, 404, 422):
        `api-error` naming the refusal, answered 200. Internal (the workload's own data, a bug): `internal-error`,
        logged with its traceback, answered 200 — a retry would meet the same data.
        """
        failure = classify(error)
        if failure is Failure.RETRY:
            failures.append(f"{ref}: {error}")  # logged once for the notification, with the 503 (intake/web.py)
            return Skip(SkipReason.API_ERROR, f"temporary failure, the notification is answered 503 so that "
                                              f"Alertmanager retries: {error}")
        if failure is Failure.REFUSED:
            # E.g. RBAC refuses a read: answer it for this pod or workload, go on with the others.
            log.warning("workload not handled", extra={"workload": str(ref), "error": str(error)})
            return Skip(SkipReason.API_ERROR, str(error))
        log.error("workload failed", exc_info=error, extra={"workload": str(ref), "error": repr(error)[:500]})
        return Skip(SkipReason.INTERNAL_ERROR, f"unexpected {type(error).__name__} while deciding {ref} (see the log)")


def _alertname(alert: Alert) -> str:
    """Metric label: known names (and the doctor's test alert) as they are, anything else folded so series stay
    bounded."""
    return alert.name if alert.name in KNOWN_ALERTS or alert.name == TEST_ALERT else "other"
