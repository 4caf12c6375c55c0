"""`reactor demo` as a person runs it: `--once` leaves nothing behind, and a stop signal stops its `reactor serve`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
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
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), f"reactor serve (pid {child}) outlived the demo"
