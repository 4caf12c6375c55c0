"""What the container image can run: the service and the commands that talk to a real cluster, not the embedded one.

The Dockerfile copies `reactor/` alone (the image is the service: no stand-in API server in a production pod), so
`reactor_sim` is not there. `reactor demo` and `reactor sim` then say at once where to run them, in one line, and
`reactor plan --kubeconfig` still plans against a cluster. Checked on a copy of the tree holding `reactor/` only,
as the image does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def image_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "reactor", tmp_path / "image" / "reactor", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "image"


def _reactor(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "HOME": str(copy)}
    # The checkout's editable install would still find reactor_sim: its finder is dropped, so only the copy's
    # `reactor/` and the venv's libraries (flask, kubernetes, ..., as the image's) are importable.
    code = ("import sys; sys.path = [p for p in sys.path if 'editable' not in p]; "
            "sys.meta_path = [f for f in sys.meta_path "
            "if 'editable' not in type(f).__module__ and 'editable' not in getattr(f, '__module__', '')]; "
            "from reactor.app.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=copy, env=env,
                          timeout=120)


@pytest.mark.parametrize("command", [["demo", "--once"], ["sim", "--port", "0"]], ids=["demo", "sim"])
def test_the_embedded_clusters_commands_say_where_to_run_them(image_copy: Path, command: list[str]) -> None:
    done = _reactor(image_copy, *command)
    assert done.returncode == 1, done.stderr
    assert "needs the embedded cluster (the reactor_sim package)" in done.stderr
    assert "the container image is the service alone" in done.stderr and "make demo" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_plan_against_a_cluster_runs_where_the_embedded_one_is_not_installed(image_copy: Path,
                                                                              tmp_path: Path) -> None:
    with SimCluster().start() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-workloads"}})
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        alerts = tmp_path / "alerts.json"
        alerts.write_text(json.dumps(notification([AlertSpec("GPUIdle", "ml-workloads", "gone-0", "main", 0.0, 1)])))
        policy = tmp_path / "policy.yaml"
        policy.write_text("namespaces: {allow: [ml-workloads]}\n")
        done = _reactor(image_copy, "plan", "--alerts", str(alerts), "--config", str(policy), "--kubeconfig",
                        str(kubeconfig))
    assert done.returncode == 0, done.stderr
    assert "not-found" in done.stdout, done.stdout
