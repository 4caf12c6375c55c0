"""Child processes for the bench and what /proc says about them: CPU seconds and RSS.

Every child is started with a bounded wait for readiness and is killed in a `finally` by the
caller through `Child.stop()`; only the process group the bench started is signalled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reactor.tools.launcher import Child, free_port, free_ports, start_process  # noqa: F401 (for the callers)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ROOT = Path(__file__).resolve().parent.parent


def start(args: Sequence[str], *, port: int, log: Path, env: dict[str, str] | None = None,
          ready_path: str | None = "/readyz", timeout: float = 30.0, probe_port: int = 0) -> Child:
    """Start `python args...` from the repository root; wait until it answers 200 on `ready_path` (on `probe_port`
    when it has one of its own), or accepts."""
    environ = dict(env or {}, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return start_process([sys.executable, *args], port=port, log=log, env=environ, cwd=ROOT, ready_path=ready_path,
                         timeout=timeout, probe_port=probe_port)


def tree(pid: int) -> list[int]:
    """The process and all its descendants (gunicorn: the master and its worker)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo.extend(int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except OSError:
            continue
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of the processes, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLOCK_TICKS


def context_switches(pids: Sequence[int]) -> int:
    """Voluntary context switches of every thread of the processes (/proc/PID/task/*/status): a thread that blocks —
    on a system call that lets go of the interpreter lock while another thread waits for it, on a lock — counts one.
    Each costs CPU beyond the code's own, so the bench reports them per request."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
            except OSError:
                continue
    return total


def rss_mb(pid: int) -> float:
    """Resident set size of one process, in MB (10^6 bytes)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def pod_rss_mb(pid: int) -> float:
    """RSS of the process and every descendant (gunicorn: master + worker), in MB: what a pod's memory counts."""
    return round(sum(rss_mb(p) for p in tree(pid) if Path(f"/proc/{p}").exists()), 1)


def pss_mb(pid: int) -> float:
    """Proportional set size of one process, in MB: its private pages, and its share of the pages it shares."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def pod_pss_mb(pid: int) -> float:
    """PSS of the process and every descendant, in MB: the pod's memory as its cgroup counts it (a page the
    gunicorn master and its worker share since the fork is counted once, not once per process)."""
    return round(sum(pss_mb(p) for p in tree(pid) if Path(f"/proc/{p}").exists()), 1)


def worker_of(master: int, timeout: float = 10.0) -> int:
    """The gunicorn worker (the master's only child process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = [p for p in tree(master) if p != master]
        if children:
            return children[0]
        time.sleep(0.1)
    raise RuntimeError(f"no gunicorn worker under {master}")


def load(port: int, bodies_file: Path, *, threads: int, duration: float, max_requests: int,
         headers: Sequence[str] = (), timeout: float = 120.0) -> dict[str, Any]:
    """Run the load generator as a child process; its JSON summary."""
    args = [sys.executable, "-m", "bench.loadgen", "--port", str(port), "--bodies", str(bodies_file),
            "--threads", str(threads), "--duration", str(duration), "--max-requests", str(max_requests)]
    for h in headers:
        args += ["--header", h]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result
