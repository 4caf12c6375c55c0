"""One real Prometheus 2.42 per module, serving a history written by `promtool tsdb create-blocks-from
openmetrics` from tests/report/history.py; the pods are the embedded cluster's, so `reactor plan` knows them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from reactor.config.settings import load_settings
from reactor.sources.prometheus import PrometheusApi
from reactor.tools.launcher import free_port
from reactor.tools.report.command import make_report
from reactor.tools.report.model import Report
from reactor.tools.report.source import PrometheusSource
from reactor.tools.rules import load_values
from reactor_sim import SimCluster
from tests.promstack.stack import PROMETHEUS_BIN, _spawn, _wait_ready
from tests.report import history
from tests.rules.conftest import require_tool

ROOT = Path(__file__).parents[2]
STEP = timedelta(minutes=1)  # the rules' evaluation interval (rules/thresholds.yaml): `for` is replayed exactly


@dataclass(frozen=True)
class History:
    url: str
    pods: list[history.Pod]
    seeds: Path
    policy: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    work = tmp_path_factory.mktemp("report-history")
    seeds = work / "seeds.yaml"
    seeds.write_text(history.seeds(), encoding="utf-8")
    policy = work / "policy.yaml"
    policy.write_text(history.POLICY, encoding="utf-8")
    with SimCluster().start() as sim:
        sim.load_manifests(seeds.read_text(encoding="utf-8"))
        sim.settle()
        cluster_pods = [p for p in sim.list("pods") if p["metadata"]["namespace"] == history.NAMESPACE]
    pods = history.pods_of(cluster_pods)
    with serve_history(work, history.openmetrics(pods)) as url:
        yield History(url, pods, seeds, policy)


@contextmanager
def serve_history(work: Path, openmetrics: str) -> Iterator[str]:
    """A real Prometheus on a loopback port serving `openmetrics` (written to blocks with `promtool tsdb
    create-blocks-from openmetrics` in `work`); its URL while the context lasts."""
    prometheus, promtool = require_tool(Path(PROMETHEUS_BIN).name), require_tool("promtool")
    source, data = work / "history.om", work / "tsdb"
    source.write_text(openmetrics, encoding="utf-8")
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)], check=True,
                   capture_output=True, timeout=120)
    config = work / "prometheus.yml"
    config.write_text(json.dumps({"global": {"evaluation_interval": "1m"}}), encoding="utf-8")
    port = free_port()
    process = _spawn("prometheus", [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}",
                                    "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                     work)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(process, url, timeout=30)
        yield url
    finally:
        process.stop()


@pytest.fixture(scope="module")
def report(served: History) -> Report:
    """The report of the whole history, at the rules' evaluation interval, with the history's policy."""
    api = PrometheusApi(served.url, timeout=60, max_body_bytes=256 << 20)
    try:
        return make_report(PrometheusSource(api), load_values(ROOT / "rules/thresholds.yaml"),
                           load_settings(str(served.policy)), since=history.T0, until=history.END, step=STEP,
                           prometheus=served.url)
    finally:
        api.close()
