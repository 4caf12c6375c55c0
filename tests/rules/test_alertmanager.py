"""deploy/alertmanager/alertmanager.yaml against the real amtool, and its reactor-facing settings."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from reactor.model import KNOWN_ALERTS
from tests.rules.conftest import REPO

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


def test_missing_metrics_inhibit_every_acting_alert_of_the_same_container() -> None:
    inhibit = yaml.safe_load(CONFIG.read_text())["inhibit_rules"]
    missing = next(r for r in inhibit if 'alertname="GPUMetricsMissing"' in r["source_matchers"])
    assert missing["equal"] == ["namespace", "pod", "container"]
    target = next(m for m in missing["target_matchers"] if m.startswith("alertname=~"))
    assert set(target.split('"')[1].split("|")) == KNOWN_ALERTS - {"GPUMetricsMissing"}
