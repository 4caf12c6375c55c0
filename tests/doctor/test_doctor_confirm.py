"""`reactor doctor` and the confirm step: the Prometheus the reactor confirms alerts against (its configured URL and
auth) answers, and the rules the policy acts on are loaded there; `confirm.enabled: false` is warned about. The
stand-in plays Prometheus here (checked against the real one in tests/promstack); a real stack answers in
tests/promstack/test_prometheus_client.py."""

from __future__ import annotations

from typing import Any

from reactor.config.settings import Settings, build_settings
from reactor.tools.doctor import confirm
from reactor.tools.doctor.report import Status
from reactor.tools.prometheus_api import PrometheusStandIn


def _settings(**confirm_keys: Any) -> Settings:
    return build_settings({"namespaces": {"allow": ["team-a"]}, "confirm": confirm_keys}, environ={})


def test_a_prometheus_with_the_rules_loaded_is_ok() -> None:
    with PrometheusStandIn() as prometheus:
        answered, rules = confirm.confirm_checks(_settings(prometheusUrl=prometheus.url))
    assert answered.status is Status.OK and "Prometheus 2.42.0" in answered.detail
    assert rules.status is Status.OK and "GPUUnderutilized" in rules.detail


def test_rules_missing_there_fail_naming_them() -> None:
    with PrometheusStandIn(rules=["GPUIdle"]) as prometheus:
        _, rules = confirm.confirm_checks(_settings(prometheusUrl=prometheus.url))
    assert rules.status is Status.FAILING
    assert "GPUSaturated" in rules.detail and "unconfirmed" in rules.detail
    assert "GPUMetricsMissing" not in rules.detail  # held, never acted on: nothing to confirm


def test_an_unreachable_prometheus_fails() -> None:
    with PrometheusStandIn() as prometheus:
        prometheus.available = False
        (check,) = confirm.confirm_checks(_settings(prometheusUrl=prometheus.url))
    assert check.status is Status.FAILING and "HTTP 503" in check.detail and "503" in check.detail
    assert "REACTOR_CONFIRM__PROMETHEUS_URL" in check.fix


def test_no_url_fails_and_confirm_off_warns() -> None:
    (missing,) = confirm.confirm_checks(_settings())
    assert missing.status is Status.FAILING and "refuses to start" in missing.detail
    (off,) = confirm.confirm_checks(_settings(enabled=False))
    assert off.status is Status.WARNING and "trusts whoever can reach Alertmanager" in off.detail
