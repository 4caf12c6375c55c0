"""One wired pipeline for the whole package: it takes ~6 s before Prometheus and Alertmanager deliver.

Started in the order that lets the slow parts overlap: the cluster and the exporter, then
Prometheus + Alertmanager (whose discovery clock starts now), then the reactor. Every process is
stopped by PID by the fixture that started it, also when a test fails. Missing Prometheus binaries
skip, or fail under PROMSTACK_REQUIRED=1 (tests/rules/conftest.py's `require_tool`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor_sim import SimCluster
from tests.e2e.mirror import ClusterMirror, NodeExporter
from tests.e2e.pipeline import (
    DELAYS,
    DONOR_ON_DEMAND_ROUTE,
    NAMESPACE,
    NORMAL,
    POLICY,
    GenerationWatch,
    Pipeline,
    with_confirm,
    with_rebalance,
)
from tests.e2e.reactor_process import start_reactor
from tests.promstack.cadvisor import FakeCadvisor
from tests.promstack.stack import (
    WebhookSink,
    binaries,
    promstack,
)

SEED = Path(__file__).with_name("seed.yaml")
TOKEN = "e2e-webhook-token-0123456789abcdef"


@pytest.fixture(scope="package")
def e2e_binaries() -> dict[str, str]:
    return binaries()


@pytest.fixture(scope="package")
def e2e_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="package")
def e2e_cluster(e2e_binaries: dict[str, str]) -> Iterator[SimCluster]:
    sim = SimCluster().start()
    try:
        sim.load_manifests(SEED)
        sim.settle()
        sim.run_controllers(interval=0.2)
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="package")
def e2e_mirror(e2e_cluster: SimCluster) -> Iterator[ClusterMirror]:
    # The exporter of the seed's one GPU node (32 GPUs: enough for every rollout's surge).
    # The GPUs of seed.yaml's node, gpu-node-1.
    with NodeExporter(gpus=40, hostname="gpu-node-1") as exporter, FakeCadvisor() as cadvisor:
        mirror = ClusterMirror(e2e_cluster, exporter, NAMESPACE, cadvisor)
        for app, (resource, name, demand) in NORMAL.items():
            mirror.set_demand(app, resource, name, demand)
        mirror.start()
        try:
            yield mirror
        finally:
            mirror.stop()


@pytest.fixture(scope="package")
def e2e_pipeline(e2e_binaries: dict[str, str], e2e_dir: Path, e2e_cluster: SimCluster,
                 e2e_mirror: ClusterMirror) -> Iterator[Pipeline]:
    token_file = e2e_dir / "token"
    token_file.write_text(TOKEN + "\n")
    sink = WebhookSink().start()
    try:
        assert e2e_mirror.cadvisor is not None
        with promstack(e2e_dir / "promstack", exporter=e2e_mirror.exporter.address, webhook_url=sink.url,
                       token_file=token_file, cadvisor=e2e_mirror.cadvisor.address,
                       routes_before=[DONOR_ON_DEMAND_ROUTE], **e2e_binaries) as stack:
            # Rebalancing on for the whole package: it acts only on a GPU quota refusal, which the scenarios of
            # ml-workloads (a 32-GPU quota) never meet; the rebalance case has its own namespace.
            policy = with_confirm(with_rebalance(POLICY, stack.alertmanager_url), stack.prometheus_url)
            reactor = start_reactor(e2e_dir / "reactor", sim=e2e_cluster, policy=policy, token_file=token_file)
            watch = GenerationWatch(e2e_cluster).start()
            try:
                sink.forward_to = f"{reactor.url}/alerts"
                pipeline = Pipeline(e2e_cluster, e2e_mirror, reactor, sink, stack, watch)
                _wait_warm(pipeline)
                yield pipeline
            finally:
                watch.stop()
                reactor.stop()
                _keep_record(sink, e2e_dir / "deliveries.jsonl")
    finally:
        sink.stop()


def _wait_warm(pipeline: Pipeline) -> None:
    """Every running pod's utilization is recorded by the rules: the scenarios start from a known state."""
    expected = len(pipeline.mirror.reported())
    expr = f'count(gpu_reactor:container_gpu_utilization:ratio{{namespace="{NAMESPACE}"}}) >= {expected}'
    pipeline.wait(lambda: pipeline.stack.query(expr), timeout=30, what=f"{expected} pods recorded by Prometheus",
                  every=0.2)


def _keep_record(sink: WebhookSink, path: Path) -> None:
    """Every notification and the reactor's answer, kept with the processes' logs for a post-mortem."""
    with path.open("w") as out:
        for d in sink.deliveries:
            record = {"at": d.at, "answered": d.answered, "status": d.status, "body": d.body, "answer": d.answer}
            out.write(json.dumps(record) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if DELAYS:
        terminalreporter.write_sep("-", "end-to-end delays (metric change -> ...)")
        for delay in DELAYS:
            terminalreporter.write_line(delay.line())
