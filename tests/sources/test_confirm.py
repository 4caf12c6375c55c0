"""The confirm step's logic (sources/confirm.py) over real HTTP against the Prometheus stand-in: what is matched,
what counts as firing (an HA pair's later replica included), what a resolve meets, and the counted requests.

The stand-in's answers are checked against the real Prometheus 2.42 in tests/promstack/test_prometheus_stand_in.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError, PrometheusUnavailable
from reactor.core.metrics import Metrics
from reactor.core.model import Alert
from reactor.intake.alerts import parse_notification
from reactor.sources.confirm import ConfirmMetrics, PrometheusConfirmer, confirmer
from reactor.sources.prometheus import PrometheusApi
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn

NOW = datetime.now(UTC)


@pytest.fixture
def prometheus() -> Iterator[PrometheusStandIn]:
    with PrometheusStandIn(durations={"GPUIdle": timedelta(hours=1)}) as stand_in:
        yield stand_in


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def confirm(prometheus: PrometheusStandIn, registry: CollectorRegistry) -> Iterator[PrometheusConfirmer]:
    metrics = ConfirmMetrics(Metrics(registry))
    api = PrometheusApi(prometheus.url, observe=metrics.observe)
    yield PrometheusConfirmer(api)
    api.close()


def _alerts(*specs: AlertSpec) -> list[Alert]:
    return list(parse_notification(notification(specs)).alerts)


def _labels(spec: AlertSpec) -> dict[str, str]:
    return _alerts(spec)[0].labels  # type: ignore[return-value]


IDLE = AlertSpec("GPUIdle", "team-a", "p-0", "main", 0.01, 2)


def test_a_firing_alert_prometheus_fires_is_confirmed_with_its_value(prometheus: PrometheusStandIn,
                                                                      confirm: PrometheusConfirmer) -> None:
    prometheus.hold(_labels(IDLE), {"value": "0.012", "gpus": "2", "idle_gpus": "1"}, 0.012)
    claimed = _alerts(AlertSpec("GPUIdle", "team-a", "p-0", "main", 0.9, 8))  # the annotation claims otherwise
    (verdict,) = confirm.confirm(claimed, NOW)
    assert verdict.firing and verdict.value == 0.012 and verdict.gpus == 2 and verdict.idle_gpus == 1
    measured = verdict.measured(claimed[0])
    assert (measured.value, measured.gpus) == (0.012, 2)
    assert measured.annotations["value"] == "0.90"  # the claim stays for the answer and the logs


@pytest.mark.parametrize("other", [
    AlertSpec("GPUIdle", "team-b", "p-0", "main", 0.01),  # another namespace
    AlertSpec("GPUIdle", "team-a", "p-1", "main", 0.01),  # another pod
    AlertSpec("GPUIdle", "team-a", "p-0", "sidecar", 0.01),  # another container
    AlertSpec("GPUUnderutilized", "team-a", "p-0", "main", 0.01),  # another alert
], ids=["namespace", "pod", "container", "alertname"])
def test_only_the_same_alert_for_the_same_container_confirms(prometheus: PrometheusStandIn,
                                                             confirm: PrometheusConfirmer, other: AlertSpec) -> None:
    prometheus.hold(_labels(other), {}, 0.01)
    (verdict,) = confirm.confirm(_alerts(IDLE), NOW)
    assert not verdict.firing and "does not fire GPUIdle for team-a/p-0 container main" in verdict.reason


def test_matching_ignores_external_labels_and_reads_exported_spellings(prometheus: PrometheusStandIn,
                                                                       confirm: PrometheusConfirmer) -> None:
    """Alertmanager's copy carries the external labels and the exporter's target labels; the rule state has the
    exported_* spelling only."""
    prometheus.hold({"alertname": "GPUIdle", "exported_namespace": "team-a", "exported_pod": "p-0",
                     "exported_container": "main"}, {}, 0.02)
    spec = AlertSpec("GPUIdle", "gpu-operator", "dcgm-exporter-x", "exporter", 0.02, extra_labels={
        "exported_namespace": "team-a", "exported_pod": "p-0", "exported_container": "main",
        "prometheus": "monitoring/k8s", "prometheus_replica": "prometheus-k8s-1", "cluster": "eu-1"})
    (verdict,) = confirm.confirm(_alerts(spec), NOW)
    assert verdict.firing and verdict.value == 0.02


def test_a_pending_alert_counts_only_when_due_within_one_evaluation_interval(prometheus: PrometheusStandIn,
                                                                             confirm: PrometheusConfirmer) -> None:
    """The other replica of an HA pair evaluates a few seconds later: pending there, due within its group's interval
    (1m in the stand-in), is the same alert. Pending since 30 minutes with `for: 1h` is not firing."""
    prometheus.hold(_labels(IDLE), {}, 0.01, state="pending", active_at=NOW - timedelta(minutes=59, seconds=30))
    assert confirm.confirm(_alerts(IDLE), NOW)[0].firing
    prometheus.hold(_labels(IDLE), {}, 0.01, state="pending", active_at=NOW - timedelta(minutes=30))
    (verdict,) = confirm.confirm(_alerts(IDLE), NOW)
    assert not verdict.firing and "pending" in verdict.reason


def test_a_resolve_meets_still_firing_only_for_a_firing_alert(prometheus: PrometheusStandIn,
                                                              confirm: PrometheusConfirmer) -> None:
    resolved = _alerts(AlertSpec("GPUIdle", "team-a", "p-0", "main", 0.01, status="resolved"))
    assert not confirm.confirm(resolved, NOW)[0].firing
    prometheus.hold(_labels(IDLE), {}, 0.01, state="pending", active_at=NOW - timedelta(hours=2))
    assert not confirm.confirm(resolved, NOW)[0].firing  # pending: never "still firing"
    prometheus.hold(_labels(IDLE), {}, 0.01)
    assert confirm.confirm(resolved, NOW)[0].firing


def test_nan_is_unknown_never_zero(prometheus: PrometheusStandIn, confirm: PrometheusConfirmer) -> None:
    prometheus.hold(_labels(IDLE), {}, math.nan)
    (verdict,) = confirm.confirm(_alerts(IDLE), NOW)
    assert verdict.firing and verdict.value is None


def test_a_rule_that_is_not_loaded_is_said(confirm: PrometheusConfirmer) -> None:
    (verdict,) = confirm.confirm(_alerts(AlertSpec("GPUExotic", "team-a", "p-0", "main")), NOW)
    assert not verdict.firing and "no alerting rule GPUExotic loaded" in verdict.reason


def test_one_request_answers_alerts_of_every_namespace(prometheus: PrometheusStandIn, confirm: PrometheusConfirmer,
                                                       registry: CollectorRegistry) -> None:
    specs = [AlertSpec("GPUIdle", f"team-{n}", f"p-{i}", "main", 0.01) for n in "abc" for i in range(20)]
    before = len(prometheus.requests)
    assert len(confirm.confirm(_alerts(*specs), NOW)) == 60
    assert len(prometheus.requests) - before == 1
    assert registry.get_sample_value("reactor_confirm_requests_total", {"result": "ok"}) == 1
    assert confirm.confirm([], NOW) == [] and len(prometheus.requests) - before == 1  # nothing asked, no request


def test_prometheus_unavailable_raises_and_is_counted(prometheus: PrometheusStandIn, confirm: PrometheusConfirmer,
                                                      registry: CollectorRegistry) -> None:
    for result in ("ok", "timeout", "unreachable", "refused", "invalid"):  # zeroed at start
        assert registry.get_sample_value("reactor_confirm_requests_total", {"result": result}) == 0
    prometheus.available = False
    with pytest.raises(PrometheusUnavailable, match="HTTP 503"):
        confirm.confirm(_alerts(IDLE), NOW)
    assert registry.get_sample_value("reactor_confirm_requests_total", {"result": "refused"}) == 1
    assert registry.get_sample_value("reactor_confirm_duration_seconds_count", {}) == 1


def test_the_settings_build_a_confirmer_or_none_only_when_off(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="confirm.prometheusUrl: required"):
        confirmer(build_settings({}, {}), Metrics())
    assert confirmer(build_settings({"confirm": {"enabled": False}}, {}), Metrics()) is None
    built = confirmer(build_settings({"confirm": {"prometheusUrl": "http://127.0.0.1:9090/prom"}}, {}),
                      Metrics())
    assert built is not None and built.api.url == "http://127.0.0.1:9090/prom"
