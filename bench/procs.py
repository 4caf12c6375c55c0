"""Child processes for the bench and what /proc says about them: CPU seconds and RSS.

Every child is started with a bounded wait for readiness and is killed in a `finally` by the
caller through `Child.stop()`; only the process group the bench started is signalled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Child:
    """A child process in its own process group, with its port and the file its output goes to."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout=5)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start(args: Sequence[str], *, port: int, log: Path, env: dict[str, str] | None = None,
          ready_path: str | None = "/readyz", timeout: float = 30.0) -> Child:
    """Start `python args...` from the repository root; wait until it answers 200 on `ready_path` (or accepts)."""
    environ = dict(os.environ, **(env or {}))
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    environ["PYTHONPATH"] = str(ROOT) + os.pathsep + environ.get("PYTHONPATH", "")
    out = open(log, "wb")
    try:
        process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    finally:
        out.close()
    child = Child(process, port, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{' '.join(args)} exited with {process.returncode}:\n{child.tail()}")
        if _ready(port, ready_path):
            return child
        time.sleep(0.1)
    child.stop()
    raise RuntimeError(f"{' '.join(args)} was not ready within {timeout:.0f} s:\n{child.tail()}")


def _ready(port: int, path: str | None) -> bool:
    try:
        if path is None:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


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


def rss_mb(pid: int) -> float:
    """Resident set size of one process, in MB (10^6 bytes)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


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
