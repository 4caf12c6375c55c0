"""`reactor doctor --send-test-alert`: one real alert through Alertmanager, confirmed on the reactor's /metrics.

The other Alertmanager checks re-enact the routing on the loaded config; this one proves it end to end. It
POSTs `GPUReactorTestAlert` (reactor="gpu", an allowed namespace, a pod that does not exist) to Alertmanager's
/api/v2/alerts, then reads `reactor_alerts_received_total{alertname="GPUReactorTestAlert",status="firing"}` on
the reactor's probe port (apart from the webhook's) until it rises: for the route's group_wait plus a margin, or its
group_interval when the route's group_by puts it into a group Alertmanager already holds. Its pod label is unique
per run, so a rerun is a new alert (and, grouped by pod or by everything, a new group).
The reactor counts it and does nothing else (skip `test-alert`). The alert's endsAt is short: Alertmanager
resolves it by itself. The only write this module makes is that one alert.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from reactor.config.fields import format_duration, parse_duration
from reactor.core.errors import ConfigError
from reactor.core.model import TEST_ALERT
from reactor.tools.doctor.alertmanager import loaded_config
from reactor.tools.doctor.http import Unreachable, get_json, send
from reactor.tools.doctor.report import Check, failing, ok
from reactor.tools.doctor.routing import route_matchers

NAME = "test-alert"
RECEIVED = "reactor_alerts_received_total"
REJECTED = "reactor_webhook_requests_total"
MARGIN = timedelta(seconds=15)  # Alertmanager's dispatch, the webhook's round trip, the reactor's answer
POLL_SECONDS = 0.5
# Alertmanager's own defaults, where no route sets them.
DEFAULT_TIMERS = {"group_wait": timedelta(seconds=30), "group_interval": timedelta(minutes=5)}
METRICS_FIX = ("pass --reactor-metrics with the reactor's probe port, once per replica "
               "(kubectl -n gpu-reactor port-forward pod/POD 8081; the Service's `metrics` port)")


@dataclass(frozen=True, slots=True)
class Timers:
    group_wait: timedelta
    group_interval: timedelta
    group_by: tuple[str, ...] = ()  # of the route the alert ends on ("..." = every label)


def timers(config: Mapping[str, Any], labels: Mapping[str, str]) -> Timers:
    """The group_wait and group_interval of the route the alert ends on (the longest, if it takes several);
    children inherit what they do not set (pure)."""
    found: list[dict[str, timedelta]] = []
    group_by: list[tuple[str, ...]] = []

    def walk(route: Mapping[str, Any], inherited: dict[str, timedelta], by: tuple[str, ...]) -> None:
        here = dict(inherited)
        for key in here:
            if key in route:
                here[key] = parse_duration(f"route.{key}", route[key])
        if "group_by" in route:
            by = tuple(str(label) for label in route.get("group_by") or ())
        matched = False
        for child in route.get("routes") or []:
            if all(m.admits(labels) for m in route_matchers(child)):
                walk(child, here, by)
                matched = True
                if not child.get("continue", False):
                    break
        if not matched:
            found.append(here)
            group_by.append(by)

    walk(config.get("route") or {}, dict(DEFAULT_TIMERS), ())
    return Timers(max(t["group_wait"] for t in found), max(t["group_interval"] for t in found), group_by[0])


def alert_labels(namespace: str, run: str = "test") -> dict[str, str]:
    """The test alert's labels; `run` makes them unique per doctor run (its pod), so a rerun is a new alert and,
    where the route groups by pod (or by everything), a new group that waits only group_wait."""
    return {"alertname": TEST_ALERT, "reactor": "gpu", "namespace": namespace, "pod": f"reactor-doctor-{run}",
            "container": "main", "severity": "warning"}


def group_labels(labels: Mapping[str, str], group_by: Sequence[str]) -> dict[str, str]:
    """The labels that name the alert's aggregation group (dispatch.go, getGroupLabels): every label for `...`,
    else the group_by labels the alert has."""
    if "..." in group_by:
        return dict(labels)
    return {name: labels[name] for name in group_by if labels.get(name)}


def existing_group(groups: Any, key: Mapping[str, str]) -> bool:
    """Whether Alertmanager already holds the group the alert joins (/api/v2/alerts/groups): then it is flushed at
    the group's next group_interval tick, not after group_wait (dispatch.go, aggrGroup.run)."""
    return isinstance(groups, list) and any(isinstance(g, dict) and g.get("labels") == dict(key) and g.get("alerts")
                                            for g in groups)


def _groups(alertmanager: str) -> Any:
    return get_json(f"{alertmanager.rstrip('/')}/api/v2/alerts/groups")


def alert_body(labels: Mapping[str, str], now: datetime, lasts: timedelta) -> list[dict[str, Any]]:
    """What /api/v2/alerts takes: one alert that resolves itself after `lasts`."""
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    return [{"labels": dict(labels),
             "annotations": {"summary": "reactor doctor's test alert: the reactor counts it and does nothing",
                             "description": "Sent by `reactor doctor --send-test-alert` to prove the route."},
             "startsAt": now.strftime(stamp), "endsAt": (now + lasts).strftime(stamp)}]


def sample(metrics_text: str, name: str, labels: Mapping[str, str]) -> float | None:
    """The sum of `name`'s samples carrying `labels`; None when there is none at all (pure)."""
    values = [s.value for family in text_string_to_metric_families(metrics_text) for s in family.samples
              if s.name == name and labels.items() <= s.labels.items()]
    return sum(values) if values else None


def _read(url: str) -> str:
    return send(f"{url.rstrip('/')}/metrics").decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Counts:
    received: float
    rejected: float  # webhook requests answered 401: a token that is not the reactor's


def counts(metrics_urls: Sequence[str], read: Callable[[str], str] = _read) -> Counts:
    """Summed over the replicas; `Unreachable` naming the first that does not answer or is no reactor."""
    received = rejected = 0.0
    for url in metrics_urls:
        text = read(url)
        got = sample(text, RECEIVED, {"alertname": TEST_ALERT, "status": "firing"})
        if got is None:
            raise Unreachable(f"{url.rstrip('/')}/metrics has no {RECEIVED}{{alertname=\"{TEST_ALERT}\"}}: not the "
                              "reactor's probe port, or a reactor without test alerts")
        received += got
        rejected += sample(text, REJECTED, {"code": "401"}) or 0.0
    return Counts(received, rejected)


def post_alert(alertmanager: str, body: list[dict[str, Any]]) -> None:
    send(f"{alertmanager.rstrip('/')}/api/v2/alerts", body=json.dumps(body).encode())


@dataclass(frozen=True, slots=True)
class Clock:
    """Injected in tests; the real one sleeps."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], datetime] = lambda: datetime.now(UTC)


def send_test_alert(alertmanager: str, config: Mapping[str, Any], namespace: str,
                    metrics_urls: Sequence[str], *, clock: Clock = Clock(), margin: timedelta = MARGIN,
                    read: Callable[[str], str] = _read, run: str | None = None,
                    groups: Callable[[str], Any] = _groups) -> Check:
    """Send the test alert (unique to this run) and wait for a replica of the reactor to count it: group_wait for a
    new group, group_interval when the route's grouping puts it into a group Alertmanager already holds."""
    if not metrics_urls:
        return failing(NAME, "not sent: the reactor's /metrics is needed to see it arrive", METRICS_FIX)
    labels = alert_labels(namespace, run or clock.now().strftime("%Y%m%d%H%M%S%f"))
    try:
        wait = timers(config, labels)
    except ConfigError as e:
        return failing(NAME, f"not sent: Alertmanager's route has {e}", "fix the route's timers")
    try:
        before = counts(metrics_urls, read)
    except Unreachable as e:
        return failing(NAME, f"not sent: {e}", METRICS_FIX)
    try:
        joins = existing_group(groups(alertmanager), group_labels(labels, wait.group_by))
    except Unreachable:
        joins = True  # unknown: wait the longer
    limit = (max(wait.group_wait, wait.group_interval) if joins else wait.group_wait) + margin
    try:
        post_alert(alertmanager, alert_body(labels, clock.now(), lasts=limit + wait.group_interval))
    except Unreachable as e:
        return failing(NAME, f"Alertmanager refused the test alert: {e}", "check --alertmanager (the API v2 URL)")
    sent = clock.monotonic()
    after = _counted(metrics_urls, before, sent + limit.total_seconds(), clock, read)
    where = f'{TEST_ALERT} in {namespace} (reactor="gpu")'
    if after.received > before.received:
        return ok(NAME, f"{where} reached the reactor {clock.monotonic() - sent:.1f}s after Alertmanager took it "
                        f"({RECEIVED} +{after.received - before.received:g}); the reactor did nothing with it")
    timer = (f"group_interval {format_duration(wait.group_interval)}: it joined an existing group" if joins
             else f"group_wait {format_duration(wait.group_wait)}")
    detail = (f"Alertmanager took {where}, but the reactor did not count it within {format_duration(limit)} "
              f"({timer} + {format_duration(margin)})")
    return _not_counted(detail, after.rejected - before.rejected, wait)


def _counted(metrics_urls: Sequence[str], before: Counts, deadline: float, clock: Clock,
             read: Callable[[str], str]) -> Counts:
    """The counts once the test alert is counted, or at the deadline."""
    now = counts(metrics_urls, read)
    while now.received <= before.received and clock.monotonic() < deadline:
        clock.sleep(POLL_SECONDS)
        now = counts(metrics_urls, read)
    return now


def _not_counted(detail: str, rejected: float, wait: Timers) -> Check:
    if rejected > 0:
        return failing(NAME, f"{detail}; the reactor answered 401 to {rejected:g} webhook request(s) meanwhile",
                       "Alertmanager sends another token than the reactor's: make the receiver's bearer "
                       "credentials the reactor's token Secret")
    return failing(NAME, detail,
                   "see alertmanager-route / reactor-webhook above; check a NetworkPolicy between Alertmanager and "
                   "the reactor, and Alertmanager's log (notify errors); with several replicas give every pod's "
                   f"--reactor-metrics; a test alert sent less than group_interval "
                   f"({format_duration(wait.group_interval)}) ago delays this one: rerun after it")


def test_alert_checks(alertmanager: str | None, metrics_urls: Sequence[str], namespace: str) -> list[Check]:
    """The `test-alert` line for `reactor doctor` (asked for with --send-test-alert)."""
    if not alertmanager:
        return [failing(NAME, "not sent: no Alertmanager to send it to", "pass --alertmanager URL")]
    return [send_test_alert(alertmanager, loaded_config(alertmanager), namespace, metrics_urls)]
