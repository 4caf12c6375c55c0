"""gunicorn's master imports none of the worker's modules: `reactor serve` assembles the service in the worker
(reactor/app/runner.py), so a pod holds Flask, the engine and the Kubernetes client once, not in two processes."""

from __future__ import annotations

import subprocess
import sys

from tests.support import HERE

WORKER_ONLY = ("kubernetes", "flask", "werkzeug", "urllib3", "reactor.engine", "reactor.app.assembly",
               "reactor.cluster.kube", "reactor.cluster.informer", "reactor.intake.web", "reactor.observe.verifier")


def test_what_the_master_runs_imports_no_module_only_the_worker_needs() -> None:
    code = ("import sys, reactor.app.cli, reactor.app.runner, reactor.app.preflight\n"
            "reactor.app.cli.build_parser('serve')\n"
            f"print(','.join(m for m in {WORKER_ONLY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          cwd=HERE.parent, env={"PYTHONPATH": str(HERE.parent)})
    assert done.stdout.strip() == "", f"imported in the master: {done.stdout.strip()}"
