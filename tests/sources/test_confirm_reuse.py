"""Reusing Prometheus's answer until its rule groups evaluate again (sources/confirm.py), over real HTTP against the
Prometheus stand-in playing an evaluation schedule: what is reused, when it is asked again, and that a reused answer
never refuses anything Prometheus would confirm.

Prometheus changes an alerting rule's state only when its group evaluates (prometheus/prometheus rules/group.go
`Group.Eval`, every `interval` after `lastEvaluation`), so an answer read between two evaluations is the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from reactor.core.metrics import Metrics
from reactor.core.model import Alert
from reactor.intake.alerts import parse_notification
from reactor.sources.confirm import ConfirmMetrics, PrometheusConfirmer, next_evaluation
from reactor.sources.prometheus import PrometheusApi
from reactor.sources.prometheus_answers import RuleGroup
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn

EVERY = timedelta(minutes=10)  # the stand-in's schedule: long enough that no test crosses a tick by accident
IDLE = AlertSpec("GPUIdle", "team-a", "p-0", "main", 0.01, 2)
OTHER = AlertSpec("GPUIdle", "team-b", "p-1", "main", 0.02, 2)


def _alert(spec: AlertSpec, *, firing: bool = True) -> Alert:
    body = notification([spec])
    if not firing:
        body["alerts"][0]["status"] = "resolved"
        body["alerts"][0]["endsAt"] = "2026-12-04T00:00:00Z"
    return parse_notification(body).alerts[0]


def _hold(prometheus: PrometheusStandIn, spec: AlertSpec, value: float) -> None:
    prometheus.hold(_alert(spec).labels, {"value": str(value), "gpus": "2", "idle_gpus": "1"}, value)


def _rules_asked(prometheus: PrometheusStandIn) -> int:
    return sum(1 for path in prometheus.requests if path.startswith("/api/v1/rules"))


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def scheduled() -> Iterator[PrometheusStandIn]:
    with PrometheusStandIn(evaluates=EVERY) as stand_in:
        yield stand_in


Make = Callable[..., PrometheusConfirmer]


@pytest.fixture
def make(registry: CollectorRegistry) -> Iterator[Make]:
    """Confirmers over a stand-in, their connections closed at the end."""
    apis: list[PrometheusApi] = []

    def build(prometheus: PrometheusStandIn, *, reuse: bool = True) -> PrometheusConfirmer:
        metrics = ConfirmMetrics(Metrics(registry))
        apis.append(PrometheusApi(prometheus.url, observe=metrics.observe))
        return PrometheusConfirmer(apis[-1], reuse=reuse, metrics=metrics)

    yield build
    for api in apis:
        api.close()


def test_an_answer_is_reused_until_the_next_evaluation(scheduled: PrometheusStandIn, make: Make,
                                                       registry: CollectorRegistry) -> None:
    _hold(scheduled, IDLE, 0.01)
    _hold(scheduled, OTHER, 0.02)
    confirm = make(scheduled)
    now = datetime.now(UTC)
    (first,) = confirm.confirm([_alert(IDLE)], now)
    (second,) = confirm.confirm([_alert(OTHER)], now + timedelta(seconds=1))
    assert first.firing and first.value == 0.01 and second.firing and second.value == 0.02
    assert _rules_asked(scheduled) == 1
    assert registry.get_sample_value("reactor_confirm_reused_total") == 1
    # The group evaluates again at its next tick: from then on, the answer is asked anew.
    assert confirm.confirm([_alert(IDLE)], now + EVERY)[0].firing
    assert _rules_asked(scheduled) == 2


def test_a_reused_answer_never_refuses_what_prometheus_now_confirms(scheduled: PrometheusStandIn,
                                                                    make: Make) -> None:
    """An alert the reused answer does not hold is asked again (one request), not answered unconfirmed; a resolve
    the reused answer still fires likewise."""
    _hold(scheduled, IDLE, 0.01)
    confirm = make(scheduled)
    now = datetime.now(UTC)
    assert confirm.confirm([_alert(IDLE)], now)[0].firing
    _hold(scheduled, OTHER, 0.02)  # as if evaluated out of the reactor's sight (clocks apart)
    verdicts = confirm.confirm([_alert(IDLE), _alert(OTHER)], now)
    assert [v.firing for v in verdicts] == [True, True] and verdicts[1].value == 0.02
    assert _rules_asked(scheduled) == 2
    scheduled.resolve(_alert(IDLE).labels)
    (resolve,) = confirm.confirm([_alert(IDLE, firing=False)], now)
    assert not resolve.firing  # no longer fired: the revert may go on
    assert _rules_asked(scheduled) == 3


def test_a_forged_alert_costs_one_request_per_notification_even_with_reuse(scheduled: PrometheusStandIn,
                                                                           make: Make) -> None:
    confirm = make(scheduled)
    now = datetime.now(UTC)
    for _ in range(3):
        assert [v.firing for v in confirm.confirm([_alert(IDLE), _alert(OTHER)], now)] == [False, False]
    assert _rules_asked(scheduled) == 3  # the first answer, then one fresh one per notification that disagreed


@pytest.mark.parametrize("case", ["off", "not-evaluated", "clock-back"])
def test_when_nothing_is_reused(case: str, make: Make, registry: CollectorRegistry) -> None:
    """`confirm.reuse: false`; a group never evaluated on a schedule (Go's zero time: the default stand-in, which
    changes when told); a reactor clock that went back past the answer."""
    with PrometheusStandIn(evaluates=None if case == "not-evaluated" else EVERY) as prometheus:
        _hold(prometheus, IDLE, 0.01)
        confirm = make(prometheus, reuse=case != "off")
        now = datetime.now(UTC)
        confirm.confirm([_alert(IDLE)], now)
        confirm.confirm([_alert(IDLE)], now - timedelta(seconds=5) if case == "clock-back" else now)
        assert _rules_asked(prometheus) == 2
        assert registry.get_sample_value("reactor_confirm_reused_total") == 0


def test_the_next_evaluation_is_the_earliest_group_capped_at_one_interval() -> None:
    fetched = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
    minute = timedelta(minutes=1)

    def group(last: datetime | None, interval: timedelta = minute, *, rules: bool = True) -> RuleGroup:
        from reactor.sources.prometheus_answers import AlertingRule
        rule = AlertingRule("GPUIdle", "up", timedelta(0), "inactive", "ok", {}, ())
        return RuleGroup("g", "f", interval, (rule,) if rules else (), last)

    assert next_evaluation([group(fetched - timedelta(seconds=20))], fetched) == fetched + timedelta(seconds=40)
    assert next_evaluation([group(fetched - timedelta(seconds=20)), group(fetched - timedelta(seconds=50))],
                           fetched) == fetched + timedelta(seconds=10)
    # Prometheus's clock ahead of the reactor's: never more than one interval.
    assert next_evaluation([group(fetched + timedelta(minutes=5))], fetched) == fetched + minute
    # Already due (the evaluation runs late), or not evaluated yet: nothing to reuse.
    assert next_evaluation([group(fetched - timedelta(minutes=2))], fetched) is None
    assert next_evaluation([group(None)], fetched) is None
    # A group without the reactor's rules does not bound it.
    assert next_evaluation([group(None, rules=False), group(fetched, timedelta(seconds=30))],
                           fetched) == fetched + timedelta(seconds=30)
