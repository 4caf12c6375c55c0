"""`reactor doctor`'s inputs and the checks issue 28 found wrong: bad flags are one line and exit 2, the token is
checked without an alert (a signed probe to the real webhook; the reactor's counters through Prometheus), an inhibit
rule that cannot fire for a GPU alert is no warning, the rule count is Prometheus's, the test alert is unique per run
and waits as the route's grouping says."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from werkzeug.serving import make_server

from reactor.app.cli import main
from reactor.tools.doctor import alertmanager, prometheus, token
from reactor.tools.doctor.delivery import alert_labels, existing_group, group_labels, timers
from reactor.tools.doctor.report import Status
from tests.deploy.deploy_helpers import ROOT
from tests.support import TOKEN, Reactor


@pytest.mark.parametrize("argv, message", [
    (["--prometheus", "127.0.0.1:9090"], "expected an http:// or https:// URL, got '127.0.0.1:9090'"),
    (["--alertmanager", "ftp://am:9093"], "expected an http:// or https:// URL"),
    (["--reactor-metrics", "localhost:8081"], "expected an http:// or https:// URL"),
    (["--thresholds", "/nonexistent"], "no such file: /nonexistent"),
    (["--token-file", "/nonexistent"], "no such file: /nonexistent"),
], ids=["scheme-less-prometheus", "other-scheme", "scheme-less-metrics", "thresholds", "token-file"])
def test_a_bad_argument_is_one_line_and_exit_2(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["doctor", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


@pytest.fixture
def webhook(reactor: Reactor) -> Iterator[str]:
    """The reactor's real webhook (its Flask app) over HTTP on a free port."""
    server = make_server("127.0.0.1", 0, reactor.client.application)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/alerts"
    finally:
        server.shutdown()
        server.server_close()


def test_the_signed_probe_tells_a_right_token_from_a_wrong_one(webhook: str, reactor: Reactor,
                                                                tmp_path: Path) -> None:
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    right.write_text(TOKEN + "\n")
    wrong.write_text("not-the-token")
    before = dict(reactor.sim.requests)
    good = token.signed_probe(webhook, right)
    bad = token.signed_probe(webhook, wrong)
    assert good.status is Status.OK and "accepts the token" in good.detail, good
    assert bad.status is Status.FAILING and "refuses the token" in bad.detail and "401" in bad.detail, bad
    assert dict(reactor.sim.requests) == before, "the probe acts on nothing"


class _Fake(BaseHTTPRequestHandler):
    """Prometheus's /api/v1/rules and /api/v1/query, answering from class-level data."""

    rules: dict[str, Any] = {}
    queries: dict[str, list[dict[str, Any]]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        from urllib.parse import parse_qs, urlparse

        url = urlparse(self.path)
        if url.path == "/api/v1/rules":
            body: Any = {"status": "success", "data": self.rules}
        else:
            expr = parse_qs(url.query)["query"][0]
            body = {"status": "success", "data": {"resultType": "vector", "result": self.queries.get(expr, [])}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _loaded(doc: dict[str, Any]) -> dict[str, Any]:
    """A rule file as Prometheus's /api/v1/rules lists it (web/api/v1 api.go, rules(): name, query, type)."""
    groups = []
    for group in doc["groups"]:
        rules = [{"name": r.get("alert") or r["record"], "query": r["expr"], "health": "ok", "labels": r.get("labels"),
                  "type": "alerting" if "alert" in r else "recording"} for r in group["rules"]]
        groups.append({"name": group["name"], "file": "gpu-reactor.rules.yaml", "rules": rules})
    return {"groups": groups + [{"name": "other", "file": "x.yaml", "rules": [
        {"name": "Watchdog", "query": "vector(1)", "health": "ok", "type": "alerting"}]}]}


def test_the_rule_count_is_the_groups_prometheus_loaded(fake_prometheus: str) -> None:
    doc = yaml.safe_load((ROOT / "rules" / "gpu-reactor.rules.yaml").read_text())
    _Fake.rules = _loaded(doc)
    _Fake.queries = {}
    total = sum(len(g["rules"]) for g in doc["groups"])
    assert len(prometheus.loaded_rules(fake_prometheus)) == total == 22
    assert {"GPUStarvedByCPU", "GPUContainerNearMemoryLimit"} <= {r["name"] for r in
                                                                   prometheus.loaded_rules(fake_prometheus)}


def _vector(value: float) -> list[dict[str, Any]]:
    return [{"metric": {}, "value": [0, str(value)]}]


@pytest.mark.parametrize("accepted, refused, wrong, status, words", [
    (3, 0, 0, Status.OK, "accepted 3 notification"),
    (0, 5, 5, Status.FAILING, "refused 5 with 401 (a wrong token)"),
    (0, 5, 2, Status.FAILING, "refused 2 with 401 (a wrong token)"),
    (0, 5, None, Status.FAILING, "refused 5 with 401 (wrong or missing token)"),  # a reactor without the split
    (0, 1, 0, Status.WARNING, "came without any token"),  # this doctor's own probe, on a rerun within the hour
    (0, 0, 0, Status.WARNING, "the token is not proven"),
])
def test_the_token_from_the_reactors_counters(fake_prometheus: str, accepted: float, refused: float,
                                              wrong: float | None, status: Status, words: str) -> None:
    metric = token.METRIC
    _Fake.queries = {f"count({metric})": _vector(2),
                     f'sum(increase({metric}{{code="200"}}[1h]))': _vector(accepted),
                     f'sum(increase({metric}{{code="401"}}[1h]))': _vector(refused)}
    if wrong is not None:
        _Fake.queries[f'sum(increase({token.UNAUTHORIZED}{{credentials="wrong"}}[1h]))'] = _vector(wrong)
    check = token.from_counters(fake_prometheus)
    assert check is not None and check.status is status and words in check.detail, check


def test_the_token_is_not_checked_when_the_reactor_is_not_scraped(fake_prometheus: str) -> None:
    _Fake.queries = {}
    check = token.from_counters(fake_prometheus)
    assert check.status is Status.WARNING and "not scraped" in check.detail


def test_inconclusive_counters_give_no_line_beside_the_signed_probe(fake_prometheus: str) -> None:
    """Found on the first-hour walk (issue 28): with --token-file and --reactor-url the probe proves the token;
    a second `webhook-token` warning saying "pass --token-file" contradicted it. Conclusive counters still speak."""
    metric = token.METRIC
    _Fake.queries = {}
    assert token.from_counters(fake_prometheus, probing=True) is None
    _Fake.queries = {f"count({metric})": _vector(2),
                     f'sum(increase({metric}{{code="200"}}[1h]))': _vector(0),
                     f'sum(increase({metric}{{code="401"}}[1h]))': _vector(0)}
    assert token.from_counters(fake_prometheus, probing=True) is None
    _Fake.queries[f'sum(increase({metric}{{code="401"}}[1h]))'] = _vector(4)
    refused = token.from_counters(fake_prometheus, probing=True)
    assert refused is not None and refused.status is Status.FAILING


# kube-prometheus-stack's stock inhibit rules (charts/kube-prometheus-stack/templates/alertmanager/secret.yaml,
# the default `alertmanager.config.inhibit_rules`).
STOCK = [
    {"source_matchers": ["severity = critical"], "target_matchers": ["severity =~ warning|info"],
     "equal": ["namespace", "alertname"]},
    {"source_matchers": ["severity = warning"], "target_matchers": ["severity = info"],
     "equal": ["namespace", "alertname"]},
    {"source_matchers": ["alertname = InfoInhibitor"], "target_matchers": ["severity = info"],
     "equal": ["namespace"]},
]
SEVERITIES = {"GPUUnderutilized": "warning", "GPUIdle": "warning", "GPUSaturated": "warning",
              "GPUMemorySaturated": "critical", "GPUMetricsMissing": "warning"}


def test_the_stock_critical_to_warning_rule_cannot_mute_a_gpu_alert() -> None:
    """equal: [namespace, alertname]: the source would be a critical alert of the same name; ours are warning."""
    check = alertmanager.not_muted({"inhibit_rules": STOCK}, "ml-workloads", SEVERITIES)
    assert check.status is Status.OK, check


def test_a_rule_that_can_fire_still_warns() -> None:
    """Without alertname in `equal`, any critical alert in the namespace mutes a warning GPU alert."""
    rule = {"source_matchers": ["severity = critical"], "target_matchers": ["severity = warning"],
            "equal": ["namespace"]}
    check = alertmanager.not_muted({"inhibit_rules": [rule]}, "ml-workloads", SEVERITIES)
    assert check.status is Status.WARNING and "GPUIdle (severity warning)" in check.detail
    # an info GPU alert is muted by the stock warning->info rule: a warning alert of the same name exists? no: ours
    # of that name are info, so the stock rules still cannot fire
    assert alertmanager.not_muted({"inhibit_rules": STOCK}, "ns", {"GPUIdle": "info"}).status is Status.WARNING


def test_the_test_alert_is_unique_per_run_and_waits_as_the_route_groups() -> None:
    one, two = alert_labels("ml", "run1"), alert_labels("ml", "run2")
    assert one != two and one["pod"] == "reactor-doctor-run1"
    config = {"route": {"receiver": "d", "group_by": ["namespace", "alertname"], "routes": [
        {"receiver": "gpu", "matchers": ['reactor="gpu"'], "group_wait": "10s", "group_interval": "2m"}]}}
    found = timers(config, one)
    assert (found.group_wait, found.group_interval, found.group_by) == (
        timedelta(seconds=10), timedelta(minutes=2), ("namespace", "alertname"))
    key = group_labels(one, found.group_by)
    assert key == group_labels(two, found.group_by) == {"namespace": "ml", "alertname": one["alertname"]}
    held = [{"labels": key, "receiver": {"name": "gpu"}, "alerts": [{"labels": one}]}]
    assert existing_group(held, group_labels(two, found.group_by))  # a rerun joins: it waits group_interval
    assert not existing_group(held, group_labels(two, ("...",)))     # grouped by everything: a new group
    assert not existing_group([], key)


def test_a_token_no_header_can_carry_is_one_line_that_never_shows_it(webhook: str, tmp_path: Path) -> None:
    """A token file with a line break or a space inside: the HTTP client would refuse the header with the whole
    token in its error (a traceback on the terminal). The doctor says what is wrong in one line, token unshown."""
    bad = tmp_path / "token"
    bad.write_text("first-half\nsecond-half\n")
    check = token.signed_probe(webhook, bad)
    assert check.status is Status.FAILING and "HTTP header can carry" in check.detail, check
    assert "first-half" not in check.detail and "second-half" not in check.detail
