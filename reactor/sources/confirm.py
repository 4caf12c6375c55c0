"""The confirm step's answer, asked of Prometheus's own rule state (`GET /api/v1/rules?type=alert`).

For each alert the engine would act on, the question is whether the Prometheus the rules run in fires it now, for
the same workload, and what its rule's expression measures. The rules endpoint answers both from rule evaluation
itself — each alerting rule's active alerts with their labels, state, activeAt and value, each group's evaluation
interval, each rule's `for` — so a scraped series that merely carries the name `ALERTS` (a target can expose any
name) never counts. One request answers every alert of a notification, whatever its namespaces, and
every alert name the reactor acts on (so the next notification's names are in it too).

Matching is on what both sides agree on: the alert name and the workload's identity — namespace, pod and container,
each the `exported_*` spelling if present, else the plain one, as intake/alerts.py `parse_alert` reads the
webhook's alert. Nothing else: Alertmanager's copy may carry external labels (`prometheus`, `cluster`,
`prometheus_replica`) that Prometheus's rule state does not, or drop some.

An HA pair behind one Service: the replica asked may evaluate a few seconds after the one whose alert was
delivered. A firing alert therefore also counts as confirmed while it is pending there and would fire within one
evaluation interval of its group (activeAt + for ≤ now + interval). A resolve is "still firing" only if Prometheus
holds the alert `firing` (keep_firing_for included), never for a pending one.

An answer is reused until the rule groups that hold the reactor's rules evaluate again. Prometheus changes an
alerting rule's state only when its group evaluates (rules/group.go `Eval`, every `interval` from
`lastEvaluation`), so until the earliest next evaluation a second request would get the same rule state: reusing it
is asking again, without the request. That is what keeps the confirm step's cost off the request path when
Prometheus holds thousands of active alerts (the whole rule state is one answer). The wait is read on the reactor's
clock against Prometheus's `lastEvaluation` (the two agree under NTP), and never exceeds one interval; a group not
evaluated yet (Go's zero time) or a clock that went back is asked again. A reused answer is trusted only where it
agrees with the alert (a firing alert it fires, a resolve it no longer fires); where it would refuse, Prometheus is
asked again. `confirm.reuse: false` asks every time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from reactor.config.settings import Settings, require_confirm_url
from reactor.core.alerts import target_labels
from reactor.core.confirm import Confirmation
from reactor.core.errors import InvalidPayload
from reactor.core.metrics import Metrics, MetricSet
from reactor.core.model import KNOWN_ALERTS, Alert
from reactor.intake.alerts import measures
from reactor.sources.metrics import ALERT_SOURCE_BUCKETS
from reactor.sources.prometheus import PrometheusApi
from reactor.sources.prometheus_answers import ActiveAlert, AlertingRule, RuleGroup

RESULTS = ("ok", "timeout", "unreachable", "refused", "invalid")

Identity = tuple[str, str | None, str | None, str | None]


def identity(name: str, labels: Mapping[str, str]) -> Identity:
    """(alertname, namespace, pod, container) as the webhook's parser names them (`core/alerts.py` `target_labels`)."""
    return (name, *target_labels(labels))


class ConfirmMetrics(MetricSet):
    """`reactor_confirm_requests_total{result}` and `reactor_confirm_duration_seconds`, every result zeroed at start
    (a series that appears only after the first failure cannot be alerted on before it)."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.requests = self.counter(
            "reactor_confirm_requests", "Requests to Prometheus's API by the confirm step, by result: ok; unreachable "
            "(no connection, TLS, DNS, an unreadable token or CA file); timeout (confirm.timeout); refused (a non-2xx "
            "answer); invalid (not JSON, not the API's shape, over the size cap).", ["result"],
            zeroed=[(result,) for result in RESULTS])
        self.duration = self.histogram(
            "reactor_confirm_duration_seconds", "Time of one request to Prometheus's API by the confirm step, in "
            "seconds, whatever its result.", buckets=ALERT_SOURCE_BUCKETS)
        self.reused = self.counter(
            "reactor_confirm_reused", "Confirm questions answered from Prometheus's last answer, reused because no "
            "rule group holding the reactor's rules has evaluated since (no request made).")

    def observe(self, result: str, seconds: float) -> None:
        self.requests.labels(result=result).inc()
        self.duration.observe(seconds)


class _Held(NamedTuple):
    """One active alert as a rule holds it, with what decides whether it counts as firing now. A tuple: one is
    made for every active alert of the answer (thousands in a large cluster), most never matched."""

    alert: ActiveAlert
    rule: AlertingRule
    group: RuleGroup

    def fires_by(self, now: datetime) -> bool:
        """Firing, or pending and due to fire within the group's next evaluation."""
        if self.alert.state == "firing":
            return True
        return (self.alert.state == "pending" and self.alert.active_at is not None
                and self.alert.active_at + self.rule.duration <= now + self.group.interval)


@dataclass(slots=True)
class _RuleState:
    """One answer of Prometheus's rule state, indexed for matching, and until when it holds."""

    asked: frozenset[str]  # the rule names it answers for
    loaded: frozenset[str]  # the alerting rules loaded there, of those asked
    held: dict[Identity, list[_Held]] = field(default_factory=dict)
    firing: dict[Identity, Confirmation] = field(default_factory=dict)  # firing alerts confirmed so far, by identity
    fetched: datetime | None = None
    until: datetime | None = None  # the earliest next evaluation of its groups (None: not reused)

    @classmethod
    def of(cls, groups: Sequence[RuleGroup], asked: frozenset[str]) -> _RuleState:
        held: dict[Identity, list[_Held]] = {}
        loaded: set[str] = set()
        for group in groups:
            for rule in group.rules:
                name = rule.name
                loaded.add(name)
                for active in rule.alerts:
                    labels = active.labels
                    if labels.get("alertname") == name:  # an alert's alertname is its rule's (rules/alerting.go)
                        key = identity(name, labels)
                        entry = _Held(active, rule, group)
                        found = held.get(key)
                        if found is None:
                            held[key] = [entry]
                        else:
                            found.append(entry)
        return cls(asked, frozenset(loaded), held)

    def answers(self, names: Collection[str], now: datetime) -> bool:
        """Still Prometheus's rule state for `names` at `now`: no group has evaluated since, and the clock did not
        go back past the answer."""
        return (self.until is not None and self.fetched is not None and self.fetched <= now < self.until
                and self.asked.issuperset(names))


def next_evaluation(groups: Sequence[RuleGroup], fetched: datetime) -> datetime | None:
    """When the earliest of `groups` that holds an alerting rule evaluates next, capped at one interval after
    `fetched`; None when that is not later than `fetched` or a group has not evaluated yet."""
    due: list[datetime] = []
    for group in groups:
        if not group.rules:
            continue
        if group.last_evaluation is None or group.interval <= timedelta(0):
            return None
        due.append(min(group.last_evaluation + group.interval, fetched + group.interval))
    until = min(due, default=None)
    return until if until is not None and until > fetched else None


class PrometheusConfirmer:
    """`Confirmer` over Prometheus's rule state. Thread-safe: one request at a time, its answer shared (a second
    notification meanwhile waits for it rather than asking again)."""

    def __init__(self, api: PrometheusApi, *, reuse: bool = True, names: Collection[str] = KNOWN_ALERTS,
                 metrics: ConfirmMetrics | None = None) -> None:
        self.api = api
        self.reuse = reuse
        self.names = frozenset(names)  # always asked together, so one answer serves every alert name
        self.metrics = metrics
        self._lock = threading.Lock()
        self._state: _RuleState | None = None

    def confirm(self, alerts: Sequence[Alert], now: datetime) -> list[Confirmation]:
        if not alerts:
            return []
        names = {a.name for a in alerts}
        state, reused = self._rule_state(names, now, reuse=True)
        verdicts = self._verdicts(alerts, state, now)
        if reused and any(v.firing != a.firing for a, v in zip(alerts, verdicts, strict=True)):
            # A reused answer only ever agrees: where it would refuse (unconfirmed, still-firing), Prometheus is
            # asked again, so a clock off by more than expected costs a request, never a wrong refusal. An answer
            # another notification got meanwhile is as new as a request: forged alerts arriving together share it.
            state, _ = self._rule_state(names, now, reuse=False, newer_than=state)
            verdicts = self._verdicts(alerts, state, now)
        return verdicts

    def _verdicts(self, alerts: Sequence[Alert], state: _RuleState, now: datetime) -> list[Confirmation]:
        return [self._one(a, state, now) for a in alerts]

    def _rule_state(self, names: set[str], now: datetime, *, reuse: bool,
                    newer_than: _RuleState | None = None) -> tuple[_RuleState, bool]:
        """Prometheus's rule state for `names`, and whether it is a reused answer rather than a new one.
        `newer_than`: an answer found wanting; one fetched after it (by another thread, while this one waited for
        the lock) serves as a new one.

        The reused answer is read without the lock: it is asked for by every notification on every request thread,
        and a lock taken that often blocks them all whenever its holder is switched out (reactor/engine/firings.py
        says what that cost). `_state` is replaced whole, after it is built; the lock serializes the requests."""
        if reuse and newer_than is None:
            state = self._state
            if state is not None and state.answers(names, now):
                if self.metrics is not None:
                    self.metrics.reused.inc()
                return state, True
        with self._lock:
            state = self._state
            if newer_than is not None and state is not None and state is not newer_than \
                    and state.asked.issuperset(names):
                return state, False
            if reuse and state is not None and state.answers(names, now):
                if self.metrics is not None:
                    self.metrics.reused.inc()
                return state, True
            asked = self.names | names
            groups = self.api.rules(asked)  # PrometheusUnavailable: raised to the caller, which writes nothing
            state = _RuleState.of(groups, asked)
            if self.reuse:
                state.fetched, state.until = now, next_evaluation(groups, now)
                self._state = state
            return state, False

    def _one(self, alert: Alert, state: _RuleState, now: datetime) -> Confirmation:
        key = (alert.name, alert.namespace, alert.pod, alert.container)  # `identity`: the parser picked them alike
        if alert.firing:
            known = state.firing.get(key)
            if known is not None:
                return known
        held = state.held.get(key, [])
        where = f"Prometheus {self.api.url}"
        if alert.name not in state.loaded:
            return Confirmation(False, f"{where} has no alerting rule {alert.name} loaded")
        if alert.firing:
            counted = [h for h in held if h.fires_by(now)]
        else:
            counted = [h for h in held if h.alert.state == "firing"]
        if not counted:
            who = f"{alert.name} for {alert.namespace}/{alert.pod}" + (f" container {alert.container}"
                                                                        if alert.container else "")
            pending = [h for h in held if h.alert.state == "pending" and h.alert.active_at is not None]
            if pending and alert.firing:
                due = min(h.alert.active_at + h.rule.duration for h in pending if h.alert.active_at is not None)
                return Confirmation(False, f"{where} holds {who} pending, firing from {due.isoformat()}")
            return Confirmation(False, f"{where} does not fire {who} now")
        # Several rules of one name (two GPUIdle windows) may hold it: the highest value, as the policy folds.
        best = max(counted, key=lambda h: -math.inf if math.isnan(h.alert.value) else h.alert.value)
        value = None if math.isnan(best.alert.value) else best.alert.value
        early = best.alert.state != "firing"
        reason = f"{where} {'holds pending, due within one interval,' if early else 'fires'} {alert.name}"
        confirmed = Confirmation(True, reason, value, **_measures(best.alert.annotations))
        if alert.firing and all(h.alert.state == "firing" for h in held):
            # Independent of the time and of what the alert claims: the same answer for every repeat of the alert
            # while this rule state is reused (the cooldown path meets the same alerts again and again).
            state.firing[key] = confirmed
        return confirmed


def _measures(annotations: Mapping[str, str]) -> dict[str, Any]:
    """gpus, idle_gpus and the CPU fields from Prometheus's own annotations; one that does not parse is unknown."""
    try:
        return measures(annotations, "prometheus")
    except InvalidPayload:
        return {}


def confirmer(settings: Settings, metrics: Metrics) -> PrometheusConfirmer | None:
    """The confirm step's `Confirmer`; None when the policy says `confirm.enabled: false` (the reactor then trusts
    whoever can reach Alertmanager: `check-config` and `doctor` say so). Raises `ConfigError` without a URL."""
    source = settings.confirm
    if not source.enabled:
        return None
    require_confirm_url(settings)
    assert source.url is not None
    counts = ConfirmMetrics.of(metrics)
    return PrometheusConfirmer(PrometheusApi(source.url, token_file=source.token_file, ca_file=source.ca_file,
                                             timeout=source.timeout, observe=counts.observe,
                                             key="confirm.prometheusUrl"), reuse=source.reuse, metrics=counts)
