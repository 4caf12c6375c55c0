"""The common case's decoding (intake/wire.py) answers exactly as the careful reading, or steps aside.

Whenever `read_envelope` returns an envelope it must equal what `json.loads` then `parse_envelope` give for the same
bytes; on any body it is not sure of (a field of another type, one invalid alert, not UTF-8 JSON) it returns None
and the careful reading answers. The real Alertmanager samples take the fast path.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor.core.errors import InvalidPayload
from reactor.intake.alerts import Envelope, parse_envelope
from reactor.intake.wire import read_envelope
from tests.support import SAMPLES, sample

pytestmark = pytest.mark.unit

NAMES = sorted(p.stem.removeprefix("am-0.25-") for p in SAMPLES.glob("*.json"))


def careful(body: bytes) -> Envelope | InvalidPayload:
    try:
        return parse_envelope(json.loads(body))
    except InvalidPayload as e:
        return e


@pytest.mark.parametrize("name", NAMES)
def test_a_real_notification_takes_the_fast_path_and_reads_the_same(name: str) -> None:
    body = json.dumps(sample(name)).encode()
    fast = read_envelope(body)
    assert fast is not None
    assert fast == careful(body)
    assert fast.notification.alerts[0].labels == sample(name)["alerts"][0]["labels"]


def test_an_invalid_alert_or_envelope_steps_aside() -> None:
    good = sample("grouped-firing")
    cases: list[dict[str, Any]] = []
    for path, value in [(("alerts", 1, "fingerprint"), "NOT-HEX"), (("alerts", 0, "startsAt"), "yesterday"),
                        (("alerts", 0, "annotations", "gpus"), "1.5"), (("alerts", 0, "labels", "pod"), 7),
                        (("alerts", 0, "status"), "pending"), (("version",), "3"), (("truncatedAlerts",), -1),
                        (("alerts", 0, "labels", "pod"), "p" * 5000), (("groupLabels",), None)]:
        body = copy.deepcopy(good)
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        cases.append(body)
    for body in cases:
        raw = json.dumps(body).encode()
        assert read_envelope(raw) is None, body
        answer = careful(raw)
        assert isinstance(answer, InvalidPayload) or answer.invalid, "the careful reading names the fault"


def test_bytes_that_are_not_utf8_json_step_aside() -> None:
    raw = json.dumps(sample("saturated-firing")).encode()
    for bad in (b"\xef\xbb\xbf" + raw, raw.replace(b'"gpu-reactor"', b'"gpu-\xffreactor"'), raw + b"x", b"",
                raw.replace(b'"4"', b"NaN"), raw.replace(b'"gpu-reactor"', b'"\\ud800"'),
                raw[:-1] + b', "deep": ' + b'{"a":' * 20_000 + b"1" + b"}" * 20_000 + b"}"):
        assert bad != raw and read_envelope(bad) is None, bad[:80]


# --- the property: fast ⇒ the same answer ---------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["firing", "resolved", "4", "", "NaN", "unknown", "-1", "1e309", "2", "0.5",
                       "0001-01-01T00:00:00Z", "2026-11-30T04:01:28.341Z", "2026-11-30T04:01:28+02:00",
                       "2026-13-30T04:01:28Z", "abc123", "ABC", "x" * 4097]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
FIELDS = ["version", "groupKey", "status", "receiver", "truncatedAlerts", "externalURL", "groupLabels",
          "commonLabels", "commonAnnotations", "alerts"]
ALERT_FIELDS = ["labels", "annotations", "fingerprint", "status", "startsAt", "endsAt", "generatorURL", "extra"]
LABELS = ["alertname", "namespace", "pod", "container", "exported_namespace", "exported_pod", "severity"]
ANNOTATIONS = ["value", "gpus", "idle_gpus", "cpu_throttling", "summary"]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    body = copy.deepcopy(sample(draw(st.sampled_from(NAMES))))
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["envelope", "alert", "label", "annotation"]))
        value = draw(JSON_VALUES)
        delete = draw(st.booleans())
        if where == "envelope":
            target, key = body, draw(st.sampled_from(FIELDS))
        else:
            alerts = body.get("alerts")
            if not isinstance(alerts, list) or not alerts or not isinstance(alerts[0], dict):
                continue
            alert = alerts[draw(st.integers(0, len(alerts) - 1))]
            if not isinstance(alert, dict):
                continue
            if where == "alert":
                target, key = alert, draw(st.sampled_from(ALERT_FIELDS))
            else:
                target = alert.get("labels" if where == "label" else "annotations")
                if not isinstance(target, dict):
                    continue
                key = draw(st.sampled_from(LABELS if where == "label" else ANNOTATIONS))
        if delete:
            target.pop(key, None)
        else:
            target[key] = value
    return json.dumps(body).encode()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_whenever_the_fast_path_answers_it_answers_as_the_careful_reading(body: bytes) -> None:
    fast = read_envelope(body)
    slow = careful(body)
    if fast is not None:
        assert fast == slow
