"""deploy/alertmanager/alertmanager.yaml against the real amtool, and its reactor-facing settings."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.core.model import KNOWN_ALERTS
from reactor.policy.values import DEFAULT_ALERTS, REVERTIBLE
from reactor.tools.launcher import free_port
from tests.promstack.stack import WebhookSink
from tests.rules.conftest import REPO, require_tool

CONFIG = REPO / "deploy/alertmanager/alertmanager.yaml"


def amtool_run(amtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([amtool, *args], capture_output=True, text=True, timeout=30, check=False)


def reactor_route() -> dict[str, Any]:
    routes = yaml.safe_load(CONFIG.read_text())["route"]["routes"]
    return next(r for r in routes if r["receiver"] == "gpu-reactor")


def test_amtool_accepts_the_config(amtool: str) -> None:
    result = amtool_run(amtool, "check-config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("alertname", sorted(KNOWN_ALERTS))
def test_reactor_alerts_route_to_the_reactor(amtool: str, alertname: str) -> None:
    result = amtool_run(
        amtool, "config", "routes", "test", f"--config.file={CONFIG}", "--verify.receivers=gpu-reactor",
        "reactor=gpu", "namespace=ml-workloads", f"alertname={alertname}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "gpu-reactor"


@pytest.mark.parametrize(
    "labels",
    [
        ["alertname=GPUIdle", "namespace=ml-workloads"],  # no routing label: not ours, whatever the name
        ["alertname=KubePodCrashLooping", "namespace=ml-workloads", "severity=warning"],
        ["alertname=GPUIdle", "reactor=cpu", "namespace=ml-workloads"],
    ],
    ids=["gpu-name-without-routing-label", "other-alert", "other-reactor"],
)
def test_other_alerts_do_not_reach_the_reactor(amtool: str, labels: list[str]) -> None:
    result = amtool_run(amtool, "config", "routes", "test", f"--config.file={CONFIG}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "default"


def test_route_groups_a_workloads_pods_together_and_never_truncates() -> None:
    route = reactor_route()
    assert route["matchers"] == ['reactor="gpu"']
    assert route["group_by"] == ["namespace", "alertname"]  # not pod: a workload's pods stay in one notification
    assert route.get("continue") is False


def test_webhook_sends_resolved_with_a_bearer_token_from_a_file() -> None:
    receivers = {r["name"]: r for r in yaml.safe_load(CONFIG.read_text())["receivers"]}
    (hook,) = receivers["gpu-reactor"]["webhook_configs"]
    assert hook["url"] == "http://gpu-reactor.gpu-reactor.svc:8080/alerts"
    assert hook["send_resolved"] is True
    assert hook["max_alerts"] == 0
    auth = hook["http_config"]["authorization"]
    assert auth["type"] == "Bearer"
    assert auth["credentials_file"].startswith("/")
    assert "credentials" not in auth  # never a token in the config


def inhibited_targets() -> dict[str, set[str]]:
    """Alert names each inhibit rule can mute (its target), by source alert name."""
    out: dict[str, set[str]] = {}
    for rule in yaml.safe_load(CONFIG.read_text())["inhibit_rules"]:
        (source,) = [m for m in rule["source_matchers"] if m.startswith("alertname")]
        (target,) = [m for m in rule["target_matchers"] if m.startswith("alertname")]
        names = set(target.split('"')[1].split("|"))
        out.setdefault(source.split('"')[1], set()).update(names)
    return out


def test_no_inhibit_rule_can_mute_a_resolve_the_reactor_may_revert_on() -> None:
    """A muted resolve is never sent later (see the promstack test below): an alert whose firing can take
    a revertible action (policy `revert`) must never be an inhibit target."""
    revertible = {alert for alert, strategies in DEFAULT_ALERTS.items() if set(strategies) & REVERTIBLE}
    assert revertible == {"GPUSaturated", "GPUMemorySaturated", "GPUUnderutilized", "GPUStarvedByCPU",
                          "GPUContainerNearMemoryLimit"}  # as in the config
    for source, targets in inhibited_targets().items():
        assert not targets & revertible, f"{source} would mute the resolves of {targets & revertible}"


def test_missing_metrics_hold_the_idle_signal_of_the_same_container() -> None:
    inhibit = yaml.safe_load(CONFIG.read_text())["inhibit_rules"]
    (missing,) = [r for r in inhibit if 'alertname="GPUMetricsMissing"' in r["source_matchers"]]
    assert missing["equal"] == ["namespace", "pod", "container"]
    assert 'reactor="gpu"' in missing["source_matchers"] and 'reactor="gpu"' in missing["target_matchers"]
    assert inhibited_targets() == {"GPUMetricsMissing": {"GPUIdle"}}


# --- the real Alertmanager: what an inhibit rule does to a resolve ---

LABELS = {"namespace": "ml-workloads", "pod": "burst-6b7c9-x2k4q", "container": "burst", "reactor": "gpu", "severity": "warning"}


@dataclass
class RunningAlertmanager:
    url: str
    sink: WebhookSink

    def post(self, alertname: str, *, resolved: bool = False) -> None:
        now = datetime.now(UTC)
        alert = {"labels": {**LABELS, "alertname": alertname}, "annotations": {"value": "0.990", "gpus": "1"},
                 "startsAt": (now - timedelta(minutes=5)).isoformat(),
                 "endsAt": (now if resolved else now + timedelta(hours=1)).isoformat()}
        request = urllib.request.Request(f"{self.url}/api/v2/alerts", data=json.dumps([alert]).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200

    def inhibited(self) -> dict[str, list[str]]:
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as response:
            return {a["labels"]["alertname"]: a["status"]["inhibitedBy"] for a in json.load(response)}

    def delivered(self, alertname: str, status: str) -> bool:
        return any(a["labels"]["alertname"] == alertname and a["status"] == status
                   for d in list(self.sink.deliveries) for a in d.body.get("alerts", []))


@contextlib.contextmanager
def running_alertmanager(binary: str, workdir: Path, config: dict[str, Any]) -> Iterator[RunningAlertmanager]:
    """Alertmanager on a loopback port with `config` (the webhook pointing at a fresh sink); stopped by PID."""
    sink = WebhookSink().start()
    workdir.mkdir(parents=True, exist_ok=True)
    token = workdir / "token"
    token.write_text("inhibit-test-token\n")
    hook = next(r for r in config["receivers"] if r["name"] == "gpu-reactor")["webhook_configs"][0]
    hook["url"], hook["http_config"]["authorization"]["credentials_file"] = sink.url, str(token)
    (workdir / "alertmanager.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (workdir / "alertmanager.log").open("wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={workdir / 'alertmanager.yaml'}", f"--storage.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", f"--web.external-url={url}", "--cluster.listen-address="],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait(lambda: _ready(url), timeout=20, what=f"Alertmanager ready ({workdir / 'alertmanager.log'})")
        yield RunningAlertmanager(url, sink)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        sink.stop()


def _ready(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
        return response.status == 200
    return False


def wait(probe: Any, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)


def _config(**timers: str) -> dict[str, Any]:
    config = yaml.safe_load(CONFIG.read_text())
    route = next(r for r in config["route"]["routes"] if r["receiver"] == "gpu-reactor")
    route.update(timers)
    return config


@pytest.mark.promstack
def test_a_resolve_reaches_the_reactor_while_metrics_are_missing(tmp_path: Path) -> None:
    """deploy/'s config: with GPUMetricsMissing firing on the container, GPUIdle is held back, and the
    resolve of a GPUSaturated (the one that reverts a priority boost) is still delivered."""
    binary = require_tool("prometheus-alertmanager")
    config = _config(group_wait="1s", group_interval="1s")
    # Alertmanager's inhibitor learns of a source on its own subscription, after the POST returns, rule by rule in
    # the config's order; a probe rule placed last, shown muting its probe, proves the deployed rule holds the source.
    config["inhibit_rules"].append({"source_matchers": ['alertname="GPUMetricsMissing"'],
                                    "target_matchers": ['alertname="InhibitorProbe"']})
    with running_alertmanager(binary, tmp_path / "deployed", config) as am:
        am.post("GPUMetricsMissing")
        am.post("InhibitorProbe")
        wait(lambda: bool(am.inhibited().get("InhibitorProbe")), timeout=10, what="the inhibitor holds its source")
        for alertname in ("GPUSaturated", "GPUIdle", "GPUUnderutilized"):
            am.post(alertname)
        wait(lambda: am.delivered("GPUSaturated", "firing") and am.delivered("GPUUnderutilized", "firing"),
             timeout=15, what="the firing alerts delivered")
        inhibited = am.inhibited()
        assert inhibited["GPUIdle"] and not inhibited["GPUSaturated"] and not inhibited["GPUUnderutilized"]
        assert not am.delivered("GPUIdle", "firing")

        am.post("GPUSaturated", resolved=True)
        wait(lambda: am.delivered("GPUSaturated", "resolved"), timeout=15, what="the resolved GPUSaturated delivered")


@pytest.mark.promstack
def test_an_inhibited_resolve_is_never_delivered(tmp_path: Path) -> None:
    """Why no inhibit rule targets an alert the reactor reverts on: Alertmanager drops a resolve that is
    muted when it happens, and does not send it when the source alert resolves later (the e2e's
    never-reverted boost)."""
    binary = require_tool("prometheus-alertmanager")
    config = _config(group_wait="1s", group_interval="1s")
    config["inhibit_rules"] = [{"source_matchers": ['alertname="GPUMetricsMissing"'],
                                "target_matchers": ['alertname="GPUSaturated"'], "equal": ["namespace", "pod", "container"]}]
    with running_alertmanager(binary, tmp_path / "muting", config) as am:
        am.post("GPUSaturated")
        wait(lambda: am.delivered("GPUSaturated", "firing"), timeout=15, what="GPUSaturated delivered")
        am.post("GPUMetricsMissing")
        wait(lambda: bool(am.inhibited().get("GPUSaturated")), timeout=10, what="GPUSaturated inhibited")
        am.post("GPUSaturated", resolved=True)
        time.sleep(3)  # three group intervals: the muted resolve was flushed (and dropped)
        am.post("GPUMetricsMissing", resolved=True)
        wait(lambda: am.delivered("GPUMetricsMissing", "resolved"), timeout=15, what="GPUMetricsMissing's resolve delivered")
        time.sleep(2)
        assert not am.delivered("GPUSaturated", "resolved")
