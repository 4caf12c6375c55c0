"""`reactor demo` as a person runs it: `--once` leaves nothing behind, and a stop signal stops its `reactor serve`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from reactor.tools.alertmanager_api import AlertmanagerStandIn
from reactor.tools.demo import SHARED, Demo, _steps, play, quota_usage, seed_shared_quota, start_reactor
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor.tools.seeds import demo_file
from reactor_sim import SimCluster

pytestmark = pytest.mark.process

ROOT = Path(__file__).parents[2]
SERVING = re.compile(r"Serving on (http://127\.0\.0\.1:(\d+)) \(reactor serve, pid (\d+);")


def demo(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reactor", "demo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)


def wait_serving(process: subprocess.Popen[str], timeout: float = 120) -> tuple[re.Match[str], str]:
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        found = SERVING.search(line)
        if found:
            return found, seen
    raise AssertionError(f"the demo never served:\n{seen}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_stops_the_reactor_child_too(signum: signal.Signals) -> None:
    process = demo()
    try:
        found, _ = wait_serving(process)
        child = int(found.group(3))
        assert alive(child)
        process.send_signal(signum)
        out, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signum
    assert f"stopped by {signum.name}" in out
    assert "Traceback" not in out
    # Its `reactor serve` stopping closes its watches: an end asked for, said nowhere (it was a warning per kind).
    assert "list/watch failed" not in out and "warning " not in out, out
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), f"reactor serve (pid {child}) outlived the demo"


def test_a_clean_run_ends_without_a_warning() -> None:
    """`make demo` ends quietly: nothing on stderr, where every stop used to print a `list/watch failed` warning
    for each watch its reactor closed on the way out."""
    done = subprocess.run([sys.executable, "-m", "reactor", "demo", "--once"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


# --- the rebalance step (issue 29): its own namespace, the reactor child asking the Alertmanager stand-in ---------

QUOTA = re.compile(r"\(quota (\d+)/(\d+)\)")


def test_the_rebalance_step_moves_gpus_from_the_idle_donor_to_the_saturated_receiver(tmp_path: Path) -> None:
    """The demo's last step as `reactor demo` plays it: a real `reactor serve` child with rebalancing on, asking
    the in-process Alertmanager API v2 stand-in; the donor shrinks first, the receiver grows once the quota's
    status shows the room, and the quota is never exceeded."""
    step = _steps()[-1]
    assert step.rows is not None and "quota" in step.title
    sim = SimCluster().start()
    try:
        sim.load_manifests(demo_file("cluster.yaml").read_text())
        seed_shared_quota(sim)  # as the demo seeds it, before its reactor starts
        with AlertmanagerStandIn() as alertmanager, PrometheusStandIn() as prometheus:
            child = start_reactor(sim, tmp_path, "demo-token", 0, alertmanager.url, prometheus.url)
            try:
                rows = play(Demo(sim, child.url, "demo-token", alertmanager, prometheus), step)
            finally:
                child.stop()
        training = sim.get("deployments", SHARED, "training")
        inference = sim.get("deployments", SHARED, "inference")
        assert (training["spec"]["replicas"], inference["spec"]["replicas"]) == (1, 3), rows
        used, hard = quota_usage(sim, SHARED)
        assert (used, hard) == (8, 8)
        events = sim.list("events", SHARED)
        pods = sim.list("pods", SHARED)
    finally:
        sim.stop()
    # The rows: refused for quota, the donor naming the receiver, the receiver naming the donor; used <= hard each.
    (refused, donated, grown) = rows
    assert refused[:2] == ("GPUSaturated (firing)", f"Deployment/{SHARED}/inference")
    assert refused[2].startswith("skipped: quota-exceeded")
    assert donated[1] == f"Deployment/{SHARED}/training"
    assert donated[2].startswith("donated: scale-replicas 2 → 1, 2 GPUs to Deployment/inference")
    assert grown[2].startswith("grown ") and "scale-replicas 2 → 3, given by Deployment/training" in grown[2]
    quotas = [tuple(int(n) for n in found.groups()) for row in rows if (found := QUOTA.search(row[2]))]
    assert quotas == [(8, 8), (6, 8), (8, 8)]
    assert all(u <= h for u, h in quotas)
    assert not [e for e in events if e["reason"] == "FailedCreate"]  # no pod was refused by the quota
    assert sorted(p["metadata"]["labels"]["app"] for p in pods) == ["inference"] * 3 + ["training"]
    # The reactor asked the stand-in, as sources/alertmanager.py asks Alertmanager: by both namespace spellings.
    asked = [urllib.parse.unquote_plus(path) for path in alertmanager.requests]
    assert any(f'filter=namespace="{SHARED}"' in p and "active=true" in p for p in asked), asked
    assert any(f'filter=exported_namespace="{SHARED}"' in p for p in asked), asked
    assert all(p.startswith("/api/v2/alerts?") for p in asked)
