"""The real reactor for the end-to-end tests: `reactor serve` (gunicorn) as a child process.

Started as `reactor demo` starts it: a policy file, the token file and the kubeconfig of the
embedded cluster through the environment, listening on a loopback port; ready once `/readyz`
answers 200. Stopped by its PID (gunicorn's master stops its worker), also when a test fails.
"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from reactor.tools.launcher import Child, LaunchError, start_serve
from reactor_sim import SimCluster
from tests.promstack.stack import StackError


@dataclass
class ReactorProcess:
    child: Child

    @property
    def url(self) -> str:
        return self.child.url

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        return self.child.popen

    def tail(self, lines: int = 40) -> str:
        return self.child.tail(lines)

    def samples(self) -> Iterator[tuple[str, dict[str, str], float]]:
        with urllib.request.urlopen(f"{self.child.probe_url}/metrics", timeout=5) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                yield s.name, dict(s.labels), float(s.value)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
        return sum(v for n, ls, v in self.samples() if n == name and labels.items() <= ls.items())

    def stop(self) -> None:
        self.child.stop()


def start_reactor(workdir: Path, *, sim: SimCluster, policy: Mapping[str, Any], token_file: Path,
                  ready_timeout: float = 30.0) -> ReactorProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "policy.yaml"
    config.write_text(yaml.safe_dump(dict(policy)))
    kubeconfig = sim.write_kubeconfig(str(workdir / "kubeconfig"))
    try:
        child = start_serve(config, token_file=token_file, kubeconfig=kubeconfig, log=workdir / "reactor.log",
                            timeout=ready_timeout)
    except LaunchError as e:
        raise StackError(str(e)) from e
    return ReactorProcess(child)
