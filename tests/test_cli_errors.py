"""Every bad argument a person can type: one line naming the flag, file or key, a non-zero status, no traceback."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactor.app.cli import build_parser, main

ROOT = Path(__file__).parents[1]
DEMO = ROOT / "reactor" / "tools" / "demo_data"
ALERTS = str(DEMO / "alerts-underutilized.json")


@dataclass(frozen=True)
class Bad:
    """An invocation, the status it must exit with, and what its one line must say."""

    argv: tuple[str, ...]
    status: int
    says: tuple[str, ...]


def run(argv: list[str]) -> int:
    """`main(argv)` as the process would end: argparse's own exits included."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def files(tmp: Path) -> dict[str, str]:
    (tmp / "bad.json").write_text("{not json")
    (tmp / "not-am.json").write_text(json.dumps({"version": "4", "status": "firing", "alerts": [{}]}))
    (tmp / "kubeconfig-not-yaml").write_text("[unclosed\n")
    (tmp / "kubeconfig-empty").write_text("just: text\n")
    (tmp / "not-k8s.yaml").write_text("metadata: {name: x}\n")
    (tmp / "token").write_text("t0ken\n")
    (tmp / "gone.yaml").write_text(f"server: {{tokenFile: {tmp / 'token'}}}\nkube: {{kubeconfig: {tmp / 'nope'}}}\n")
    return {k: str(tmp / k) for k in ("bad.json", "not-am.json", "kubeconfig-not-yaml", "kubeconfig-empty",
                                      "not-k8s.yaml", "gone.yaml")} | {"tmp": str(tmp), "missing": str(tmp / "nope")}


CASES: dict[str, Callable[[dict[str, str]], Bad]] = {
    "no-command": lambda f: Bad((), 2, ("reactor:", "COMMAND", "--help")),
    "unknown-command": lambda f: Bad(("bogus",), 2, ("invalid choice: 'bogus'",)),
    "plan-without-alerts": lambda f: Bad(("plan",), 2, ("--alerts",)),
    "plan-alerts-missing": lambda f: Bad(("plan", "--alerts", f["missing"]), 2, ("--alerts", "cannot read")),
    "plan-alerts-not-json": lambda f: Bad(("plan", "--alerts", f["bad.json"]), 2, ("--alerts", "not JSON")),
    "plan-alerts-not-alertmanager": lambda f: Bad(("plan", "--alerts", f["not-am.json"]), 2,
                                                  ("--alerts", "not a valid Alertmanager payload")),
    "plan-kubeconfig-missing": lambda f: Bad(("plan", "--alerts", ALERTS, "--kubeconfig", f["missing"]), 2,
                                             ("--kubeconfig", "no such file")),
    "plan-kubeconfig-not-yaml": lambda f: Bad(("plan", "--alerts", ALERTS, "--kubeconfig", f["kubeconfig-not-yaml"]),
                                              2, ("--kubeconfig", "no usable kubeconfig")),
    "plan-kubeconfig-no-context": lambda f: Bad(("plan", "--alerts", ALERTS, "--kubeconfig", f["kubeconfig-empty"]),
                                                2, ("--kubeconfig", "no usable kubeconfig")),
    "plan-seed-missing": lambda f: Bad(("plan", "--alerts", ALERTS, "--seed", "deploy/nope"), 2,
                                       ("--seed deploy/nope", "no such file or folder")),
    "plan-seed-not-k8s": lambda f: Bad(("plan", "--alerts", ALERTS, "--seed", f["not-k8s.yaml"]), 2,
                                       ("--seed", "not a Kubernetes object")),
    "plan-config-missing": lambda f: Bad(("plan", "--alerts", ALERTS, "--config", f["missing"]), 2,
                                         ("invalid configuration", "cannot read")),
    "plan-both-sources": lambda f: Bad(("plan", "--alerts", ALERTS, "--seed", "x", "--kubeconfig", "y"), 2,
                                       ("not allowed with",)),
    "plan-output": lambda f: Bad(("plan", "--alerts", ALERTS, "--output", "xml"), 2, ("--output", "'xml'")),
    "check-config-without-file": lambda f: Bad(("check-config",), 2, ("FILE",)),
    "check-config-missing": lambda f: Bad(("check-config", f["missing"]), 2, ("cannot read", f["missing"])),
    "check-config-folder": lambda f: Bad(("check-config", f["tmp"]), 2, ("cannot read",)),
    "rules-without-render": lambda f: Bad(("rules",), 2, ("COMMAND",)),
    "rules-outside-the-repo": lambda f: Bad(("rules", "render", "--check", "--root", f["tmp"]), 2,
                                            ("no values file", "repository root", "--root")),
    "rules-values-missing": lambda f: Bad(("rules", "render", "--values", f["missing"]), 2, ("--values",)),
    "sim-seed-missing": lambda f: Bad(("sim", "--seed", "nope", "--kubeconfig", f["missing"]), 2,
                                      ("--seed nope", "no such file")),
    "sim-port-not-a-number": lambda f: Bad(("sim", "--port", "x"), 2, ("--port", "not a port number")),
    "sim-port-too-big": lambda f: Bad(("sim", "--port", "70000"), 2, ("--port", "0-65535")),
    "demo-port-negative": lambda f: Bad(("demo", "--port", "-1"), 2, ("--port",)),
    "serve-config-missing": lambda f: Bad(("serve", "--config", f["missing"]), 2, ("cannot read",)),
    "serve-without-token-file": lambda f: Bad(("serve",), 2, ("server.tokenFile: required",
                                                               "REACTOR_SERVER__TOKEN_FILE")),
    "serve-kubeconfig-missing": lambda f: Bad(("serve", "--config", f["gone.yaml"]), 2,
                                              ("kube.kubeconfig", "no usable kubeconfig")),
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No REACTOR_* from the caller's shell, no in-cluster config, and an empty HOME (no ~/.kube/config)."""
    import os

    for name in [n for n in os.environ if n.startswith("REACTOR_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_bad_argument_is_one_line_and_a_non_zero_status(
        case: str, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    bad = CASES[case](files(tmp_path))
    status = run(list(bad.argv))
    out, err = capsys.readouterr()
    assert status == bad.status, err
    assert "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1, err
    assert all(s in err for s in bad.says), err


@pytest.mark.parametrize("command", ["sim", "demo"])
def test_a_port_in_use_is_named(command: str, tmp_path: Path, clean_env: None,
                                capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        extra = ["--kubeconfig", str(tmp_path / "k")] if command == "sim" else ["--once"]
        status = run([command, "--port", str(port), *extra])
    err = capsys.readouterr().err
    assert status == 2
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in err and "0 for any free one" in err


@pytest.mark.parametrize("argv", [
    ["plan", "--alerts", ALERTS, "--seed", "deploy/nope"],
    ["check-config", "/nonexistent.yaml"],
], ids=["plan", "check-config"])
def test_as_a_process_no_traceback_reaches_the_terminal(argv: list[str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "reactor", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _commands(parser: argparse.ArgumentParser, prefix: str = "reactor") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{prefix} {name}")
    return found


@pytest.mark.parametrize("command,parser", _commands(build_parser()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_and_argument_has_help(command: str, parser: argparse.ArgumentParser) -> None:
    assert parser.description, command
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(choice.help for choice in action._choices_actions), command
        else:
            assert action.help and action.help != argparse.SUPPRESS, f"{command} {action.dest}"


def test_the_rules_help_lists_render(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["rules", "--help"]) == 0
    assert "render" in capsys.readouterr().out
