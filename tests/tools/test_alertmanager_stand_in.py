"""The demo's Alertmanager stand-in, its answers computed directly: the matcher grammar of pkg/labels/parse.go
`ParseMatcher` (v0.25.0), api/v2/api.go `matchFilterLabels`, and the gettableAlert fields of api/v2/openapi.yaml.
The same answers are compared with a real Alertmanager 0.25 in tests/promstack/test_alertmanager_stand_in.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reactor.tools.alertmanager_api import AlertmanagerStandIn, BadRequest, matches_all, parse_matcher
from reactor.tools.payloads import AlertSpec

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("text,name,op,value", [
    ('namespace="ml-shared"', "namespace", "=", "ml-shared"),
    ("  alertname =~ GPUIdle|GPUUnderutilized ", "alertname", "=~", "GPUIdle|GPUUnderutilized"),
    (r'ns!="a\"b\\c\nd"', "ns", "!=", 'a"b\\c\nd'),
    (r'x="a\qb"', "x", "=", r"a\qb"),  # a spurious escape is a literal backslash
    ('x=""', "x", "=", ""),
])
def test_matchers_parse_as_alertmanager_parses_them(text: str, name: str, op: str, value: str) -> None:
    m = parse_matcher(text)
    assert (m.name, m.op, m.value) == (name, op, value)


@pytest.mark.parametrize("text,message", [
    ("not a matcher", "bad matcher format: not a matcher"),
    ('x="un"closed"', 'matcher value contains unescaped double quote: "un"closed"'),
    ('x="open', 'matcher value contains unescaped double quote: "open'),
    ("x=~(", "error parsing regexp"),
])
def test_a_matcher_that_does_not_parse_is_a_bad_request(text: str, message: str) -> None:
    with AlertmanagerStandIn() as stand_in, pytest.raises(BadRequest, match=message.replace("(", r"\(")):
        stand_in.alerts({"filter": [text]})


def test_regular_expressions_are_anchored_and_empty_values_match_absent_labels() -> None:
    labels = {"alertname": "GPUIdleX", "namespace": "ml-shared"}
    assert not matches_all([parse_matcher('alertname=~"GPUIdle"')], labels)
    assert matches_all([parse_matcher('alertname=~"GPUIdle.*"'), parse_matcher('exported_namespace=""')], labels)
    assert matches_all([parse_matcher('namespace!=""')], labels)
    assert not matches_all([parse_matcher('namespace=""')], labels)


def test_the_answer_is_gettable_alerts_sorted_by_fingerprint_without_ended_ones() -> None:
    with AlertmanagerStandIn() as stand_in:
        specs = [AlertSpec("GPUIdle", "ml-shared", f"training-{i}", "training", 0.03, 2, starts_at=NOW)
                 for i in range(3)]
        stand_in.fire(specs, NOW)
        answer = stand_in.alerts({"filter": ['namespace="ml-shared"']}, NOW + timedelta(minutes=1))
        assert [a["fingerprint"] for a in answer] == sorted(a["fingerprint"] for a in answer)
        assert len(answer) == 3
        # openapi.yaml gettableAlert: its required fields and alert's (labels, generatorURL); nothing else.
        assert sorted(answer[0]) == sorted(["annotations", "receivers", "fingerprint", "startsAt", "updatedAt",
                                            "endsAt", "status", "labels", "generatorURL"])
        assert answer[0]["status"] == {"inhibitedBy": [], "silencedBy": [], "state": "active"}
        assert answer[0]["endsAt"] == "2026-12-01T10:04:00.000Z"  # Prometheus's 4 × resend delay
        assert stand_in.alerts({}, NOW + timedelta(minutes=5)) == []  # past endsAt: resolved
        assert stand_in.alerts({"active": ["false"]}, NOW) == []
        with pytest.raises(BadRequest, match="active in query must be of type boolean"):
            stand_in.alerts({"active": ["maybe"]}, NOW)
