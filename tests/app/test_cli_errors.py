"""Every bad argument a person can type: one line naming the flag, file or key, a non-zero status, no traceback."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactor.app.cli import build_parser, main
from reactor.app.preflight import api_server_reachable
from reactor.config.settings import build_settings

pytestmark = pytest.mark.process

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "reactor" / "tools" / "demo_data"
ALERTS = str(DEMO / "alerts-underutilized.json")


@dataclass(frozen=True)
class Bad:
    """An invocation, the status it must exit with, and what its one line must say."""

    argv: tuple[str, ...]
    status: int
    says: tuple[str, ...]
    lines: int = 1  # one per problem: a heading and a line each when there are several


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
    (tmp / "token-only.yaml").write_text(f"server: {{tokenFile: {tmp / 'token'}}}\n")
    (tmp / "tls.yaml").write_text(f"server: {{tokenFile: {tmp / 'token'}, tlsCert: /no.pem, tlsKey: /no.key}}\n")
    (tmp / "state-key").write_text("k" * 64 + "\n")
    (tmp / "gone.yaml").write_text(f"server: {{tokenFile: {tmp / 'token'}}}\nstate: {{keyFile: {tmp / 'state-key'}}}\n"
                                   f"kube: {{kubeconfig: {tmp / 'nope'}}}\nlogging: {{level: WARNING}}\n")
    (tmp / "latin1.yaml").write_bytes("policy: {dryRun: true}  # r\xe9acteur\n".encode("latin-1"))
    (tmp / "latin1.json").write_bytes('{"version": "4", "receiver": "r\xe9"}'.encode("latin-1"))
    (tmp / "duplicate.yaml").write_text("policy:\n  dryRun: true\n  cooldown: 30m\n  dryRun: false\n")
    names = ("latin1.yaml", "latin1.json", "duplicate.yaml", "bad.json", "not-am.json", "kubeconfig-not-yaml", "kubeconfig-empty", "not-k8s.yaml", "gone.yaml",
             "tls.yaml")
    return {k: str(tmp / k) for k in names} | {"tmp": str(tmp), "missing": str(tmp / "nope")}


CASES: dict[str, Callable[[dict[str, str]], Bad]] = {
    "no-command": lambda f: Bad((), 2, ("reactor:", "COMMAND", "--help")),
    "unknown-flag": lambda f: Bad(("--bogus",), 2, ("unrecognized arguments: --bogus",)),
    "unknown-flag-of-a-command": lambda f: Bad(("check-config", f["duplicate.yaml"], "--bogus"), 2,
                                               ("unrecognized arguments: --bogus",)),
    "check-config-not-utf8": lambda f: Bad(("check-config", f["latin1.yaml"]), 2, ("latin1.yaml", "not UTF-8")),
    "check-config-duplicate-key": lambda f: Bad(("check-config", f["duplicate.yaml"]), 2,
                                                ("duplicate key 'dryRun' on line 4 (first on line 2)",)),
    "plan-alerts-not-utf8": lambda f: Bad(("plan", "--alerts", f["latin1.json"]), 2, ("--alerts", "not UTF-8")),
    "plan-config-not-utf8": lambda f: Bad(("plan", "--alerts", ALERTS, "--config", f["latin1.yaml"]), 2,
                                          ("not UTF-8",)),
    "serve-config-not-utf8": lambda f: Bad(("serve", "--config", f["latin1.yaml"]), 2, ("not UTF-8",)),
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
    "sim-kubeconfig-unwritable": lambda f: Bad(("sim", "--kubeconfig", f["missing"] + "/k"), 2,
                                               ("--kubeconfig", "cannot write")),
    "sim-port-not-a-number": lambda f: Bad(("sim", "--port", "x"), 2, ("--port", "not a port number")),
    "sim-port-too-big": lambda f: Bad(("sim", "--port", "70000"), 2, ("--port", "0-65535")),
    "demo-port-negative": lambda f: Bad(("demo", "--port", "-1"), 2, ("--port",)),
    "serve-config-missing": lambda f: Bad(("serve", "--config", f["missing"]), 2, ("cannot read",)),
    "serve-without-token-file": lambda f: Bad(("serve",), 2, ("server.tokenFile: required",
                                                               "REACTOR_SERVER__TOKEN_FILE")),
    "serve-tls-files-missing": lambda f: Bad(("serve", "--config", f["tls.yaml"]), 2,
                                             ("2 problems", "server.tlsCert: no such file",
                                              "server.tlsKey: no such file"), lines=3),
    "serve-without-state-key": lambda f: Bad(("serve", "--config", f["tls.yaml"].replace("tls", "token-only")), 2,
                                             ("state.keyFile: required unless dryRun",)),
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
    root = logging.getLogger()  # `serve` configures logging before it fails: leave none behind
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_bad_argument_is_one_line_and_a_non_zero_status(
        case: str, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    bad = CASES[case](files(tmp_path))
    status = run(list(bad.argv))
    out, err = capsys.readouterr()
    assert status == bad.status, err
    assert "Traceback" not in out + err
    assert len(err.strip().splitlines()) == bad.lines, err
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


def test_a_webhook_port_in_use_is_one_line_per_listener(tmp_path: Path, clean_env: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "state-key").write_text("k" * 64 + "\n")
    with socket.socket() as webhook, socket.socket() as probes:
        for busy in (webhook, probes):
            busy.bind(("127.0.0.1", 0))
            busy.listen()
        ports = webhook.getsockname()[1], probes.getsockname()[1]
        config = tmp_path / "policy.yaml"
        config.write_text(f"server: {{tokenFile: {tmp_path / 'token'}, listen: '127.0.0.1:{ports[0]}', "
                          f"probeListen: '127.0.0.1:{ports[1]}'}}\nstate: {{keyFile: {tmp_path / 'state-key'}}}\n")
        status = run(["serve", "--config", str(config)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"server.listen: cannot listen on 127.0.0.1:{ports[0]}: Address already in use" in err
    assert f"server.probeListen: cannot listen on 127.0.0.1:{ports[1]}: Address already in use" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 3, err


def test_a_reader_that_leaves_the_pipe_early_is_no_traceback(tmp_path: Path) -> None:
    """`reactor plan --output json | head -5`: the reader has closed its end before the plan is written (a pipe
    buffer would otherwise hide it); exit 141 (128 + SIGPIPE) quietly."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "reactor", "plan", "--alerts", ALERTS, "--output", "json"],
                              stdout=write_end, stderr=subprocess.PIPE, cwd=ROOT, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    finally:
        os.close(write_end)
    assert done.returncode == 141 and b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr


def test_version_does_not_import_the_kubernetes_client() -> None:
    """`reactor --version` answers at once: the client (seconds to import) is loaded only by commands that talk
    to a cluster."""
    code = ("import sys\nfrom reactor.app.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'reactor_sim', 'flask')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


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


def test_an_unreachable_api_server_is_one_line_and_exit_1(tmp_path: Path, clean_env: None,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A kubeconfig naming a server that takes no connection (a cluster that is down, a wrong address): said in one
    line before any worker starts, exit 1 ("the cluster did not answer"), where gunicorn's worker used to print an
    80-line traceback and exit 3."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: the connection is refused
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
            "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
        (tmp_path / "token").write_text("t0ken\n")
        (tmp_path / "state-key").write_text("k" * 64 + "\n")
        config = tmp_path / "policy.yaml"
        config.write_text(f"server: {{tokenFile: {tmp_path / 'token'}, listen: '127.0.0.1:0', "
                          f"probeListen: '127.0.0.1:0'}}\nstate: {{keyFile: {tmp_path / 'state-key'}}}\n"
                          f"kube: {{kubeconfig: {kubeconfig}}}\nconfirm: {{prometheusUrl: 'http://127.0.0.1:9'}}\n")
        status = run(["serve", "--config", str(config)])
    err = capsys.readouterr().err
    assert status == 1, err
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}: Connection refused" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_cluster_behind_a_proxy_is_not_dialled_straight(tmp_path: Path, clean_env: None) -> None:
    """A kubeconfig cluster with `proxy-url` is reached through the proxy (the client's kube_config.py reads it): the
    preflight does not dial the server itself, which would refuse a setup that works."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: dialled straight, the connection is refused
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', proxy-url: 'http://proxy:3128'}}}}]\n"
            "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
        api_server_reachable(build_settings({"kube": {"kubeconfig": str(kubeconfig)}}, {}), timeout=0.5)
