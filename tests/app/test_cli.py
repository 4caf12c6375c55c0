"""The `reactor` command line: check-config, plan, and the settings it validates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactor.app.cli import main
from reactor.config.settings import env_name, load_settings
from reactor.tools.payloads import AlertSpec, notification

pytestmark = pytest.mark.process

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "reactor" / "tools" / "demo_data"


def test_check_config_accepts_the_demo_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(DEMO / "policy.yaml")]) == 0
    assert "ok (allow=['ml-workloads', 'kubeflow-user-example-com', 'ml-shared']" in capsys.readouterr().out


@pytest.mark.parametrize("text,key", [
    ("cooldown: soon\n", "cooldown"),
    ("targetUtilization: 2\n", "targetUtilization"),
    ("gpus: {min: 4, max: 2}\n", "gpus.min"),
    ("namespaces: {allow: [Bad_Name]}\n", "namespaces.allow[0]"),
    ("alerts: {GPUIdle: [shrink-everything]}\n", "alerts.GPUIdle[0]"),
    ("budget: {global: {actions: -1, per: 10m}}\n", "budget.global.actions"),
    ("colldown: 5m\n", "colldown"),
    ("server: {tlsCert: /x.pem}\n", "server.tlsCert"),
    ("- just\n- a list\n", "policy.yaml: the policy file must be a YAML mapping"),
    ("key: [unclosed\n", "policy.yaml"),
], ids=["duration", "ratio-bound", "min-over-max", "namespace-name", "strategy", "budget", "typo", "tls-pair", "not-mapping", "yaml"])
def test_check_config_names_the_offending_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reactor check-config: invalid configuration: ")
    assert key in err


def test_check_config_as_a_process_exits_non_zero(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("dryRun: maybe\n")
    done = subprocess.run([sys.executable, "-m", "reactor", "check-config", str(path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "dryRun: expected true or false, got 'maybe'" in done.stderr


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("dryRun: false\nnamespaces: {allow: [a]}\n")
    settings = load_settings(path, {env_name("dryRun"): "true", env_name("namespaces.allow"): "a,b",
                                    env_name("budget.namespace"): "{actions: 2, per: 1m}"})
    assert settings.policy.dry_run is True
    assert settings.policy.allow == ("a", "b")
    assert settings.policy.budget_namespace.actions == 2
    assert env_name("server.tokenFile") == "REACTOR_SERVER__TOKEN_FILE"


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    from reactor.core.errors import ConfigError
    with pytest.raises(ConfigError, match="^REACTOR_COOLDOWN: expected a duration"):
        load_settings(None, {"REACTOR_COOLDOWN": "[1, 2]"})


def test_serve_refuses_to_start_without_a_token_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("namespaces: {allow: [ml-workloads]}\n")
    done = subprocess.run([sys.executable, "-m", "reactor", "serve", "--config", str(path)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 2
    assert "server.tokenFile: required" in done.stderr


def test_plan_against_seeded_manifests_explains_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = notification([AlertSpec("GPUSaturated", "ml-workloads", "trainer-0", "trainer", 0.98, 1),
                         AlertSpec("GPUSaturated", "kube-system", "x-0", "x", 0.98, 1)], group_by=("alertname",))
    alerts = tmp_path / "n.json"
    alerts.write_text(json.dumps(body))
    assert main(["plan", "--alerts", str(alerts), "--config", str(DEMO / "policy.yaml"), "--seed", str(DEMO / "cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert "workload: StatefulSet/ml-workloads/trainer" in out
    assert "would apply: set-priority medium-priority-gpu → high-priority-gpu" in out
    assert "considered resize-gpu-up: quota-exceeded" in out
    assert "skipped: namespace-not-allowed" in out


def test_plan_rejects_a_broken_notification(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alerts = tmp_path / "n.json"
    alerts.write_text(json.dumps({"version": "4", "status": "firing", "alerts": [{}]}))
    assert main(["plan", "--alerts", str(alerts), "--seed", str(DEMO / "cluster.yaml")]) == 2
    assert "not a valid Alertmanager payload" in capsys.readouterr().err


def test_serve_refuses_to_start_without_a_state_key(tmp_path: Path) -> None:
    """No ephemeral key: a restart or a second replica could not verify the state it finds (README)."""
    path = tmp_path / "policy.yaml"
    path.write_text("namespaces: {allow: [ml-workloads]}\n")
    (tmp_path / "token").write_text("t" * 32)
    done = subprocess.run([sys.executable, "-m", "reactor", "serve", "--config", str(path)], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                      "REACTOR_SERVER__TOKEN_FILE": str(tmp_path / "token")})
    assert done.returncode == 2
    assert "state.keyFile: required unless dryRun" in done.stderr
