"""Parsing real Alertmanager 0.25 payloads, and rejecting broken ones with the field named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from reactor.core.errors import InvalidPayload
from reactor.intake.alerts import parse_notification, parse_time
from reactor.tools.payloads import fingerprint
from tests.support import SAMPLES, sample

pytestmark = pytest.mark.unit

ALL_SAMPLES = sorted(p.stem.removeprefix("am-0.25-") for p in SAMPLES.glob("*.json"))


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_real_sample_parses(name: str) -> None:
    body = sample(name)
    n = parse_notification(body)
    assert n.version == "4" and n.receiver == "gpu-reactor"
    assert len(n.alerts) == len(body["alerts"])
    for alert, raw in zip(n.alerts, body["alerts"]):
        assert alert.namespace == "ml-workloads"
        assert alert.fingerprint == raw["fingerprint"] == fingerprint(raw["labels"])
        assert alert.starts_at.tzinfo is not None


def test_underutilized_sample_fields() -> None:
    (a,) = parse_notification(sample("underutilized-firing")).alerts
    assert (a.name, a.status, a.pod, a.container, a.value, a.gpus) == (
        "GPUUnderutilized", "firing", "llm-inference-7d9f8c6b5-x2k4p", "server", 0.03, 4)
    assert a.ends_at is None, "a firing alert's 0001-01-01 endsAt means 'not ended'"
    assert a.key == ("cceb3988c3c8ff2b", "2026-11-30T04:01:28.341000+00:00")


def test_resolved_sample_keeps_firing_key_and_value() -> None:
    firing = parse_notification(sample("underutilized-firing")).alerts[0]
    resolved = parse_notification(sample("underutilized-resolved")).alerts[0]
    assert resolved.status == "resolved" and resolved.ends_at is not None
    assert resolved.key == firing.key
    assert resolved.value == 0.03, "a resolved alert keeps the annotations it fired with"


def test_exported_labels_name_the_workload_not_the_exporter() -> None:
    (a,) = parse_notification(sample("exported-and-target-labels-firing")).alerts
    assert a.labels["namespace"] == "gpu-operator"
    assert (a.namespace, a.pod, a.container) == ("ml-workloads", "llm-inference-7d9f8c6b5-x2k4p", "server")


def test_grouped_sample_keeps_every_alert_in_order() -> None:
    n = parse_notification(sample("grouped-firing"))
    assert [a.pod for a in n.alerts] == [
        "embedder-5c4d3b2a1-q8w7e", "llm-inference-7d9f8c6b5-h6j2v",
        "llm-inference-7d9f8c6b5-w5t7r", "llm-inference-7d9f8c6b5-x2k4p"]


def test_nan_value_means_unknown_never_idle() -> None:
    """GPUMetricsMissing prints NaN when no utilization was ever seen (e.g. MIG without profiling)."""
    body = sample("metrics-missing-firing")
    body["alerts"][0]["annotations"]["value"] = "NaN"
    (a,) = parse_notification(body).alerts
    assert a.value is None and a.name == "GPUMetricsMissing"


def test_unknown_fields_are_accepted() -> None:
    body = sample("saturated-firing")
    body["notification_reason"] = "repeat"
    body["routeLabels"] = {"x": "y"}
    body["alerts"][0]["newField"] = {"anything": [1, 2]}
    assert parse_notification(body).alerts[0].name == "GPUSaturated"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is KeyError:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return mutate


BROKEN = [
    ("version-3", _set("version", "3"), "version"),
    ("version-number", _set("version", 4), "version"),
    ("no-alerts", _set("alerts", KeyError), "alerts"),
    ("alerts-object", _set("alerts", {}), "alerts"),
    ("bad-status", _set("status", "pending"), "status"),
    ("alert-not-object", _set("alerts.0", "x"), "alerts[0]"),
    ("labels-missing", _set("alerts.0.labels", KeyError), "alerts[0].labels"),
    ("label-not-string", _set("alerts.0.labels.pod", 7), "alerts[0].labels.pod"),
    ("no-alertname", _set("alerts.0.labels.alertname", KeyError), "alerts[0].labels.alertname"),
    ("bad-starts-at", _set("alerts.0.startsAt", "yesterday"), "alerts[0].startsAt"),
    ("starts-at-null", _set("alerts.0.startsAt", None), "alerts[0].startsAt"),
    ("bad-fingerprint", _set("alerts.0.fingerprint", "../../etc"), "alerts[0].fingerprint"),
    ("no-fingerprint", _set("alerts.0.fingerprint", KeyError), "alerts[0].fingerprint"),
    ("alert-status", _set("alerts.0.status", "ok"), "alerts[0].status"),
    ("value-not-number", _set("alerts.0.annotations.value", "high"), "alerts[0].annotations.value"),
    ("value-infinite", _set("alerts.0.annotations.value", "+Inf"), "alerts[0].annotations.value"),
    ("value-negative", _set("alerts.0.annotations.value", "-0.5"), "alerts[0].annotations.value"),
    ("gpus-fraction", _set("alerts.0.annotations.gpus", "1.5"), "alerts[0].annotations.gpus"),
    ("truncated-negative", _set("truncatedAlerts", -1), "truncatedAlerts"),
    ("group-key-missing", _set("groupKey", KeyError), "groupKey"),
    ("common-labels-list", _set("commonLabels", []), "commonLabels"),
    ("huge-label", _set("alerts.0.labels.pod", "x" * 5000), "alerts[0].labels.pod"),
]


@pytest.mark.parametrize("mutate,field", [(m, f) for _, m, f in BROKEN], ids=[i for i, _, _ in BROKEN])
def test_broken_variants_are_rejected_naming_the_field(mutate: Callable[[dict[str, Any]], None], field: str) -> None:
    body = copy.deepcopy(sample("underutilized-firing"))
    mutate(body)
    with pytest.raises(InvalidPayload) as e:
        parse_notification(body)
    assert e.value.field == field
    assert str(e.value).startswith(field)


@pytest.mark.parametrize("body", [[], "x", 3, None], ids=["list", "string", "number", "null"])
def test_body_must_be_an_object(body: Any) -> None:
    with pytest.raises(InvalidPayload, match="expected a JSON object"):
        parse_notification(body)


@pytest.mark.parametrize("raw,expected", [
    ("2026-11-30T04:01:28.341Z", datetime(2026, 11, 30, 4, 1, 28, 341000, tzinfo=UTC)),
    ("2026-11-30T04:01:28.123456789Z", datetime(2026, 11, 30, 4, 1, 28, 123456, tzinfo=UTC)),
    ("2026-11-30T06:01:28+02:00", datetime(2026, 11, 30, 4, 1, 28, tzinfo=UTC)),
], ids=["millis", "nanos", "offset"])
def test_rfc3339_times_as_go_prints_them(raw: str, expected: datetime) -> None:
    assert parse_time("t", raw) == expected


def test_invalid_calendar_date_is_rejected() -> None:
    with pytest.raises(InvalidPayload, match="not a valid date"):
        parse_time("t", "2026-02-30T00:00:00Z")


def test_samples_are_byte_identical_to_shared_copies() -> None:
    """The samples in tests/ are copies of the captured ones; they must not drift."""
    shared = SAMPLES.parents[2] / "shared" / "samples"
    if not shared.is_dir():
        pytest.skip("shared/samples is not beside this checkout")
    for path in SAMPLES.glob("*.json"):
        assert json.loads(path.read_text()) == json.loads((shared / path.name).read_text())


TEMPLATE_ERROR = '<error expanding template: error executing template __alert_GPUSaturated: template: x:1:12: ' \
                 'executing "x" at <query>: error calling query: query timed out>'


@pytest.mark.parametrize("key", ["value", "gpus", "idle_gpus", "cpu_throttling"])
def test_a_resolve_whose_number_prometheus_could_not_render_is_still_a_resolve(key: str) -> None:
    """Prometheus prints a template error in place of an annotation it could not expand. On a firing alert that is
    the alert's own `invalid-alert` (nothing is sized by an unreadable number); a resolve is sized by nothing, and
    Alertmanager sends it once: refused, the revert it was due would wait for ever. Its numbers are left unknown."""
    resolved = sample("underutilized-resolved")
    resolved["alerts"][0]["annotations"][key] = TEMPLATE_ERROR
    (alert,) = parse_notification(resolved).alerts
    assert alert.status == "resolved" and alert.fingerprint == sample("underutilized-resolved")["alerts"][0]["fingerprint"]
    assert (alert.value, alert.gpus, alert.idle_gpus, alert.cpu_throttling) == (None, None, None, None)
    firing = sample("underutilized-firing")
    firing["alerts"][0]["annotations"][key] = TEMPLATE_ERROR
    with pytest.raises(InvalidPayload) as e:
        parse_notification(firing)
    assert e.value.field == f"alerts[0].annotations.{key}"
