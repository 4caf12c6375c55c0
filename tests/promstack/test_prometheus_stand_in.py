"""The Prometheus stand-in (reactor/tools/prometheus_api.py) answers as the real Prometheus 2.42 does, and the confirm
step (sources/prometheus.py, sources/confirm.py) reads the real one's rule state as it reads the stand-in's.

The real Prometheus runs the reactor's rules (rendered from rules/tests/thresholds-fast.yaml) over the fake
exporter; one pod is made underutilized until GPUUnderutilized fires there. The stand-in is told the same alert
fires. Then the same questions go to both — `/api/v1/rules?type=alert` (what the confirm step asks),
`type=record`, a `type` that is not one, `/api/v1/alerts`, `/api/v1/status/buildinfo` — and the answers must have
the same fields, of the same types and spellings, at every level (group, rule, alert), values printed as Go prints
them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reactor.intake.alerts import parse_notification
from reactor.sources.confirm import PrometheusConfirmer
from reactor.sources.prometheus import PrometheusApi
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn, go_float, go_time
from tests.promstack.exporter import FakeDcgmExporter
from tests.promstack.stack import PromStack, get_json

pytestmark = pytest.mark.promstack

NS, POD, CONTAINER = "ml-workloads", "confirm-7c9d8b6f5-q2w3e", "server"
RFC3339_NANO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


def _ours(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for g in rules["data"]["groups"] for r in g["rules"] for a in r.get("alerts", [])
            if a["labels"].get("pod") == POD and a["labels"]["alertname"] == "GPUUnderutilized"]


@pytest.fixture(scope="module")
def firing(stack: PromStack, dcgm_exporter: FakeDcgmExporter) -> Iterator[dict[str, Any]]:
    """The real Prometheus firing GPUUnderutilized for POD; yields its active alert as /api/v1/rules shows it."""
    dcgm_exporter.set_pod(NS, POD, CONTAINER, gpus=2, utilization=0.10)
    deadline = time.monotonic() + 30
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rules = get_json(f"{stack.prometheus_url}/api/v1/rules?type=alert")[1]
        found = [a for a in _ours(rules) if a["state"] == "firing"]
        if found:
            break
        time.sleep(0.3)
    assert found, "GPUUnderutilized never fired in the real Prometheus"
    try:
        yield found[0]
    finally:
        dcgm_exporter.remove_pod(NS, POD)


@pytest.fixture(scope="module")
def stand_in(firing: dict[str, Any]) -> Iterator[PrometheusStandIn]:
    with PrometheusStandIn() as prometheus:
        prometheus.hold(firing["labels"], firing["annotations"], float(firing["value"]))
        yield prometheus


def _shape(value: Any, key: str = "") -> Any:
    """The JSON's shape: object keys (recursively), list element shapes, scalar types; labels and annotations are
    objects of strings whatever their keys (the rule's own)."""
    if key in ("labels", "annotations"):
        return "object of strings" if all(isinstance(v, str) for v in value.values()) else value
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def test_the_rules_answer_has_the_real_fields_at_every_level(stack: PromStack, stand_in: PrometheusStandIn,
                                                            firing: dict[str, Any]) -> None:
    code, real = get_json(f"{stack.prometheus_url}/api/v1/rules?type=alert")
    code_in, ours = get_json(f"{stand_in.url}/api/v1/rules?type=alert")
    assert code == code_in == 200
    assert set(real) == set(ours) == {"status", "data"} and real["status"] == ours["status"] == "success"
    real_group, our_group = real["data"]["groups"][0], ours["data"]["groups"][0]
    assert set(real_group) == set(our_group)
    real_rule = next(r for r in real_group["rules"] if r["name"] == "GPUUnderutilized")
    our_rule = next(r for r in our_group["rules"] if r["name"] == "GPUUnderutilized")
    # every field of the real rule, of the same JSON type (lastError is omitted when empty, in both)
    assert _shape({k: v for k, v in real_rule.items() if k != "alerts"}) == \
        _shape({k: v for k, v in our_rule.items() if k != "alerts"})
    assert _shape(_ours(real)[0]) == _shape(_ours(ours)[0])
    assert real_rule["type"] == our_rule["type"] == "alerting" and real_rule["state"] == our_rule["state"] == "firing"
    assert {g["name"] for g in real["data"]["groups"]} == {our_group["name"]} == {"gpu-reactor"}


def test_values_and_times_are_printed_as_go_prints_them(firing: dict[str, Any], stand_in: PrometheusStandIn) -> None:
    assert go_float(float(firing["value"])) == firing["value"]  # strconv.FormatFloat(v, 'e', -1, 64)
    assert RFC3339_NANO.match(firing["activeAt"])
    (ours,) = _ours(get_json(f"{stand_in.url}/api/v1/rules?type=alert")[1])
    assert ours["value"] == firing["value"] and RFC3339_NANO.match(ours["activeAt"])
    for v in (0.0, 1.0, 0.25, 1e-05, 123456789.0, 0.1 + 0.2, float("nan"), float("inf")):
        assert float(go_float(v)) == v or v != v
    assert go_time(datetime(2026, 12, 1, 10, 0, 0, 120000, tzinfo=UTC)) == "2026-12-01T10:00:00.12Z"


@pytest.mark.parametrize("query", ["type=record", "type=ALERT", "type=bogus", "rule_name[]=GPUIdle&type=alert"])
def test_the_same_question_gets_the_same_kind_of_answer(stack: PromStack, stand_in: PrometheusStandIn,
                                                        query: str) -> None:
    code, real = get_json(f"{stack.prometheus_url}/api/v1/rules?{query}")
    code_in, ours = get_json(f"{stand_in.url}/api/v1/rules?{query}")
    assert code == code_in, (real, ours)
    if code != 200:
        assert real["errorType"] == ours["errorType"] == "bad_data" and set(real) == set(ours)
        return
    kinds = {r["type"] for g in real["data"]["groups"] for r in g["rules"]}
    assert kinds == {r["type"] for g in ours["data"]["groups"] for r in g["rules"]} or not ours["data"]["groups"][0][
        "rules"] and kinds <= {"recording"}
    if "rule_name" in query:  # 2.42 ignores the newer filter: every alerting rule comes back, in both
        assert len({r["name"] for g in real["data"]["groups"] for r in g["rules"]}) > 1
        assert len({r["name"] for g in ours["data"]["groups"] for r in g["rules"]}) > 1


def test_alerts_and_buildinfo_have_the_real_fields(stack: PromStack, stand_in: PrometheusStandIn) -> None:
    _, real = get_json(f"{stack.prometheus_url}/api/v1/alerts")
    _, ours = get_json(f"{stand_in.url}/api/v1/alerts")
    assert set(real["data"]) == set(ours["data"]) == {"alerts"}
    assert _shape(real["data"]["alerts"][0]) == _shape(ours["data"]["alerts"][0])
    _, real_build = get_json(f"{stack.prometheus_url}/api/v1/status/buildinfo")
    _, our_build = get_json(f"{stand_in.url}/api/v1/status/buildinfo")
    assert set(real_build["data"]) == set(our_build["data"]) and real_build["data"]["version"].startswith("2.42")


def test_the_confirm_step_reads_the_real_rule_state(stack: PromStack, firing: dict[str, Any]) -> None:
    """The alert as Alertmanager delivers it (with external labels the rule state does not carry) is confirmed with
    the real expression's value; a forged one for another pod is not; the client's answers parse."""
    api = PrometheusApi(stack.prometheus_url, timeout=5)
    try:
        confirm = PrometheusConfirmer(api)
        genuine = AlertSpec("GPUUnderutilized", NS, POD, CONTAINER, 0.99, 2,
                            extra_labels={"prometheus": "monitoring/k8s", "prometheus_replica": "prometheus-k8s-0"})
        forged = AlertSpec("GPUUnderutilized", NS, "other-team-0", CONTAINER, 0.01, 2)
        alerts = list(parse_notification(notification([genuine, forged])).alerts)
        verdicts = dict(zip((a.pod for a in alerts), confirm.confirm(alerts, datetime.now(UTC)), strict=True))
        assert verdicts[POD].firing and verdicts[POD].value is not None and 0.05 < verdicts[POD].value < 0.3
        assert not verdicts["other-team-0"].firing
        groups = api.rules(["GPUUnderutilized"])
        assert groups and all(r.name == "GPUUnderutilized" for g in groups for r in g.rules)
        assert groups[0].interval.total_seconds() == 1  # the fast rules' evaluationInterval
        (sample,) = api.query(f'gpu_reactor:container_gpus:count{{namespace="{NS}",pod="{POD}"}}')
        assert sample.value == 2
    finally:
        api.close()
