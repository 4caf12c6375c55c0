"""The real reactor for the end-to-end tests: `reactor serve` (gunicorn) as a child process.

Started as `reactor demo` starts it: a policy file, the token file and the kubeconfig of the
embedded cluster through the environment, listening on a loopback port; ready once `/readyz`
answers 200. Stopped by its PID (gunicorn's master stops its worker), also when a test fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml
from prometheus_client.parser import text_string_to_metric_families

from reactor.sim import SimCluster
from tests.promstack.stack import StackError, free_port


@dataclass
class ReactorProcess:
    url: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def samples(self) -> Iterator[tuple[str, dict[str, str], float]]:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                yield s.name, dict(s.labels), float(s.value)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
        return sum(v for n, ls, v in self.samples() if n == name and labels.items() <= ls.items())

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                # Its own session: this reaches gunicorn's master and worker, and nothing else.
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)


def start_reactor(workdir: Path, *, sim: SimCluster, policy: Mapping[str, Any], token_file: Path,
                  ready_timeout: float = 30.0) -> ReactorProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "policy.yaml"
    config.write_text(yaml.safe_dump(dict(policy)))
    kubeconfig = sim.write_kubeconfig(str(workdir / "kubeconfig"))
    port = free_port()
    env = dict(os.environ, REACTOR_SERVER__TOKEN_FILE=str(token_file), REACTOR_KUBE__KUBECONFIG=kubeconfig,
               REACTOR_SERVER__LISTEN=f"127.0.0.1:{port}")
    env.pop("KUBERNETES_SERVICE_HOST", None)
    log = workdir / "reactor.log"
    with log.open("wb") as out:
        popen = subprocess.Popen([sys.executable, "-m", "reactor", "serve", "--config", str(config)], env=env,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    process = ReactorProcess(f"http://127.0.0.1:{port}", popen, log)
    try:
        _wait_ready(process, ready_timeout)
    except BaseException:
        process.stop()
        raise
    return process


def _wait_ready(process: ReactorProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise StackError(f"the reactor exited with {process.popen.returncode}:\n{process.tail()}")
        try:
            with urllib.request.urlopen(f"{process.url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise StackError(f"the reactor was not ready at {process.url} within {timeout}s:\n{process.tail()}")
