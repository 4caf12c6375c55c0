"""gunicorn's master imports none of the worker's modules: `reactor serve` assembles the service in the worker
(reactor/app/runner.py), so a pod holds Flask, the engine and the Kubernetes client once, not in two processes."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import HERE

WORKER_ONLY = ("kubernetes", "flask", "werkzeug", "urllib3", "reactor.engine", "reactor.app.assembly",
               "reactor.cluster.kube", "reactor.cluster.informer", "reactor.intake.web", "reactor.observe.verifier",
               # the probe server and what it brings (the master binds its socket only: reactor/app/listeners.py)
               "reactor.app.probe_server", "asyncio", "prometheus_client")
# Not msgspec: the core's alert and outcome values are msgspec Structs, so the master's configuration check loads it
# (3.8 MB RSS, mostly its shared object). Loaded before the fork, its pages are the worker's too: the pod's PSS counts
# them once, which the bench's whole-pod figure measures.


def test_what_the_master_runs_imports_no_module_only_the_worker_needs() -> None:
    code = ("import sys, reactor.app.cli, reactor.app.runner, reactor.app.preflight\n"
            "reactor.app.cli.build_parser('serve')\n"
            f"print(','.join(m for m in {WORKER_ONLY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          cwd=HERE.parent, env={"PYTHONPATH": str(HERE.parent)})
    assert done.stdout.strip() == "", f"imported in the master: {done.stdout.strip()}"


def test_the_master_checks_the_state_keys_without_announcing_them(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Found on issue 28's walk: `reactor serve` logged "state keys loaded" twice (the master's preflight, then
    the worker). The master checks them silently; the worker, which uses them, says it once."""
    from reactor.app import preflight
    from reactor.config.settings import build_settings
    from reactor.state.seal import load_state_keys

    (tmp_path / "token").write_text("t" * 32)
    (tmp_path / "key").write_text("k" * 64)
    (tmp_path / "kubeconfig").write_text("current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n")
    settings = build_settings({"server": {"tokenFile": str(tmp_path / "token")},
                               "state": {"keyFile": str(tmp_path / "key")},
                               "kube": {"kubeconfig": str(tmp_path / "kubeconfig")},
                               "confirm": {"prometheusUrl": "http://127.0.0.1:9090"}}, environ={})
    with caplog.at_level(logging.INFO, logger="reactor.state.seal"):
        preflight.check(settings)
        assert [r.getMessage() for r in caplog.records] == []
        load_state_keys(str(tmp_path / "key"), None, required=True)
    assert [r.getMessage() for r in caplog.records] == ["state keys loaded"]
