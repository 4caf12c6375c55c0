"""Every answer of the webhook's HTTP contract (DESIGN.md), each with its clear message."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from tests.support import TOKEN, Reactor, build_reactor, files_checked, make_settings, sample


def test_200_with_an_outcome_per_alert(reactor: Reactor) -> None:
    r = reactor.post(sample("grouped-firing"))
    assert r.status_code == 200
    body = r.get_json()
    assert body["status"] == "ok"
    assert len(body["outcomes"]) == 4
    # The captured pods do not exist in this cluster: every alert is answered, none is dropped.
    assert {o["reason"] for o in body["outcomes"]} == {"not-found"}
    assert reactor.metric("reactor_webhook_requests_total", code="200") == 1


def test_the_200_answer_is_compact_ascii_json_in_field_order(reactor: Reactor) -> None:
    """The answer is written without `jsonify` (one decision's part encoded once, see outcome.answer_json): it is
    still byte for byte what `jsonify` wrote, hostile label text included."""
    body = sample("grouped-firing")
    body["alerts"][0]["labels"]["pod"] = "p\u2028\u00f8d\n\"x\x1b"
    r = reactor.post(body)
    assert r.status_code == 200 and r.mimetype == "application/json"
    assert r.data == (json.dumps(r.get_json(), separators=(",", ":")) + "\n").encode()
    assert list(r.get_json()) == ["status", "summary", "outcomes"]
    assert list(r.get_json()["outcomes"][1])[:8] == ["alert", "fingerprint", "startsAt", "status", "namespace", "pod",
                                                      "workload", "result"]


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic dGVzdA==", f"Bearer {TOKEN}x",
                                    f"Bearer {TOKEN[:-1]}", f"bearer {TOKEN}", "Bearer wrong"],
                         ids=["missing", "empty", "no-token", "blank-token", "basic", "longer", "shorter",
                              "lowercase-scheme", "wrong"])
def test_401_for_missing_or_wrong_token(reactor: Reactor, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    r = reactor.client.post("/alerts", json=sample("underutilized-firing"), headers=headers)
    assert r.status_code == 401
    assert r.get_json() == {"error": "missing or wrong bearer token"}
    assert reactor.sim.requests == {} or all(v == 0 for v in reactor.sim.requests.values())


def test_a_401_is_counted_by_what_the_credentials_were(reactor: Reactor) -> None:
    """`reactor doctor` tells a probe or a receiver without credentials (missing) from a stale Secret (wrong): its
    own reachability probe sends no token, and must not read back as Alertmanager's token being wrong."""
    body = sample("underutilized-firing")
    for header in (None, "", "Bearer", "Bearer  ", "Basic dGVzdA==", f"bearer {TOKEN}"):
        reactor.client.post("/alerts", json=body, headers={} if header is None else {"Authorization": header})
    for header in (f"Bearer {TOKEN}x", "Bearer wrong"):
        reactor.client.post("/alerts", json=body, headers={"Authorization": header})
    unauthorized = "reactor_webhook_unauthorized_total"
    assert reactor.metric(unauthorized, credentials="missing") == 6
    assert reactor.metric(unauthorized, credentials="wrong") == 2
    assert reactor.metric("reactor_webhook_requests_total", code="401") == 8


def test_401_comes_before_any_other_check(reactor: Reactor) -> None:
    r = reactor.client.post("/alerts", data=b"x" * 10, headers={"Content-Type": "text/plain"})
    assert r.status_code == 401


def test_413_for_a_body_over_the_limit(sim: SimCluster, token_file: Path) -> None:
    r = build_reactor(sim, make_settings(token_file, server={"tokenFile": str(token_file), "maxBodyBytes": 2048}))
    big = sample("underutilized-firing")
    big["commonAnnotations"]["padding"] = "x" * 4000
    resp = r.post(big)
    assert resp.status_code == 413
    assert resp.get_json() == {"error": "body larger than 2048 bytes"}
    assert r.metric("reactor_webhook_requests_total", code="413") == 1


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_415_when_not_json(reactor: Reactor, content_type: str | None) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if content_type:
        headers["Content-Type"] = content_type
    r = reactor.client.post("/alerts", data=json.dumps(sample("underutilized-firing")), headers=headers)
    assert r.status_code == 415
    assert "expected Content-Type application/json" in r.get_json()["error"]


def test_json_with_charset_is_accepted(reactor: Reactor) -> None:
    r = reactor.client.post("/alerts", data=json.dumps(sample("underutilized-firing")),
                            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200


@pytest.mark.parametrize("raw,message", [
    (b"{not json", "(body): not valid JSON"),
    (b"\xff\xfe{}", "(body): not valid UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "(body)"),
    (json.dumps({"version": "3"}).encode(), "version: expected \"4\""),
], ids=["syntax", "utf8", "deep-nesting", "version"])
def test_400_names_what_is_wrong(reactor: Reactor, raw: bytes, message: str) -> None:
    r = reactor.client.post("/alerts", data=raw, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert r.status_code == 400
    assert message in r.get_json()["error"]


def _with_a_broken_alert(reactor: Reactor, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A genuine alert on llm-inference, and before it a broken one for another team's pod."""
    body = reactor.alerts("GPUUnderutilized", "llm-inference", "server", value=0.03, gpus=4)
    body["alerts"] = body["alerts"][:1]
    broken = copy.deepcopy(body["alerts"][0])
    broken["labels"]["pod"] = "victim-5b6c7d8e9f-abcde"
    mutate(broken)
    body["alerts"].insert(0, broken)
    return body


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(alert: dict[str, Any]) -> None:
        *parents, last = key.split(".")
        node = alert
        for p in parents:
            node = node[p]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
    return mutate


BROKEN_ALERTS = [
    ("starts-at-missing", _set("startsAt", KeyError), "alerts[0].startsAt",
     "expected an RFC 3339 timestamp string, got null"),
    ("value-negative", _set("annotations.value", "-1"), "alerts[0].annotations.value",
     "expected a finite number >= 0, got '-1'"),
    ("value-text", _set("annotations.value", "abc"), "alerts[0].annotations.value", "expected a number, got 'abc'"),
    ("value-infinite", _set("annotations.value", "Inf"), "alerts[0].annotations.value",
     "expected a finite number >= 0, got 'Inf'"),
    ("gpus-fraction", _set("annotations.gpus", "1.5"), "alerts[0].annotations.gpus", "expected a whole number"),
    ("fingerprint", _set("fingerprint", "../x"), "alerts[0].fingerprint", "expected lowercase hex"),
    ("labels-list", _set("labels", []), "alerts[0].labels", "expected an object of strings, got a list"),
    ("no-alertname", _set("labels.alertname", KeyError), "alerts[0].labels.alertname", "missing"),
    ("status", _set("status", "maybe"), "alerts[0].status", "expected one of firing, resolved"),
]


@pytest.mark.parametrize(("mutate", "field", "problem"), [b[1:] for b in BROKEN_ALERTS],
                         ids=[b[0] for b in BROKEN_ALERTS])
def test_a_broken_alert_is_its_own_outcome_and_the_genuine_one_beside_it_is_applied(
        reactor: Reactor, mutate: Callable[[dict[str, Any]], None], field: str, problem: str) -> None:
    """A 4xx is never retried by Alertmanager: one malformed alert answered 400 would lose every other alert of the
    group, another team's included. It is answered 200, named, and the rest is decided as if it were not there."""
    r = reactor.post(_with_a_broken_alert(reactor, mutate))
    assert r.status_code == 200, r.get_json()
    broken, genuine = r.get_json()["outcomes"]
    assert broken["result"] == "skipped" and broken["reason"] == "invalid-alert"
    assert broken["detail"].startswith(f"invalid alert: {field}: ") and problem in broken["detail"]
    assert genuine["result"] == "applied" and genuine["workload"] == "Deployment/ml-workloads/llm-inference"
    assert reactor.metric("reactor_alerts_skipped_total", reason="invalid-alert") == 1


def test_400_only_for_a_broken_envelope(reactor: Reactor) -> None:
    for key, value, field in (("version", "3", "version"), ("alerts", {}, "alerts"), ("status", "x", "status")):
        body = sample("underutilized-firing")
        body[key] = value
        r = reactor.post(body)
        assert r.status_code == 400 and r.get_json()["field"] == field, r.get_json()


def test_503_when_the_api_server_fails(reactor: Reactor) -> None:
    reactor.sim.inject_fault(verb="get", status=500, count=100)
    r = reactor.post(sample("underutilized-firing"))
    assert r.status_code == 503
    assert r.get_json()["error"].startswith("temporary failure, retry:")
    assert reactor.metric("reactor_webhook_requests_total", code="503") == 1


def test_healthz_and_metrics(reactor: Reactor) -> None:
    assert reactor.probe("/healthz").json() == {"status": "ok"}
    text = reactor.probe("/metrics").body.decode()
    for name in ("reactor_alerts_received_total", "reactor_actions_total", "reactor_alerts_skipped_total",
                 "reactor_workload_skips_total", "reactor_alerts_truncated_total",
                 "reactor_webhook_requests_total", "reactor_webhook_duration_seconds_bucket",
                 "reactor_build_info", "reactor_budget_limit", 'reactor_budget_used{scope="global"} 0.0',
                 "reactor_verifier_leader 0.0", "reactor_verifications_pending 0.0",
                 # the process and platform collectors, on the service's own registry
                 "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "python_info",
                 "python_gc_collections_total"):
        assert name in text
    for counter in ("reactor_alerts_skipped_total", "reactor_workload_skips_total"):
        assert f'{counter}{{reason="cooldown"}} 0.0' in text, "skip reasons are visible before the first event"



def test_readyz_follows_the_api_server(sim: SimCluster, token_file: Path) -> None:
    up = build_reactor(sim, make_settings(token_file))
    down = build_reactor(sim, make_settings(token_file))
    assert up.probe("/readyz").status == 200
    sim.stop()
    resp = down.probe("/readyz")
    assert resp.status == 503
    assert resp.json()["status"] == "not ready"


def test_unknown_route_and_method_are_json(reactor: Reactor) -> None:
    assert reactor.client.get("/nope").status_code == 404
    r = reactor.client.get("/alerts")
    assert r.status_code == 405 and "error" in r.get_json()


def test_token_rotation_needs_no_restart(reactor: Reactor, token_file: Path) -> None:
    token_file.write_text("rotated-token-value-that-is-longer\n")
    files_checked()
    assert reactor.post(sample("underutilized-firing")).status_code == 401
    assert reactor.post(sample("underutilized-firing"), token="rotated-token-value-that-is-longer").status_code == 200


def test_truncated_alerts_are_logged_and_counted(reactor: Reactor, caplog: pytest.LogCaptureFixture) -> None:
    """Alertmanager's `truncatedAlerts` (alerts past the receiver's max_alerts, dropped from the body): nobody
    sees them, so the reactor says so: one warning per notification, reactor_alerts_truncated_total by alert."""
    body = sample("grouped-firing")
    body["truncatedAlerts"] = 7
    assert reactor.post(body).status_code == 200
    assert reactor.metric("reactor_alerts_truncated_total") == 7
    (record,) = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert record.levelname == "WARNING" and record.truncated == 7  # type: ignore[attr-defined]
    assert reactor.post(sample("grouped-firing")).status_code == 200  # none left out: nothing added
    assert reactor.metric("reactor_alerts_truncated_total") == 7
