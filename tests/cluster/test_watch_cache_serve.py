"""`reactor serve` (gunicorn) with `kube.watchCache`: the informers run in the worker (threads do not survive
gunicorn's fork), /readyz waits for their first list, a notification reads no workload from the API, and
SIGTERM stops the process with its watches open."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import yaml

from reactor.tools.launcher import start_serve
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster
from tests.cluster.test_watch_cache import WORKLOAD_READS
from tests.support import NAMESPACE, TOKEN

pytestmark = pytest.mark.process


def test_serve_reads_workloads_from_its_watch_cache(sim: SimCluster, token_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"namespaces": {"allow": [NAMESPACE]}, "logging": {"format": "text"},
                                      "kube": {"watchCache": True, "timeout": "2s"}}))
    prometheus = PrometheusStandIn().start()  # what the confirm step asks: the rules fire what the test posts
    child = start_serve(config, token_file=token_file, kubeconfig=sim.write_kubeconfig(str(tmp_path / "kubeconfig")),
                        log=tmp_path / "serve.log", env={"REACTOR_CONFIRM__PROMETHEUS_URL": prometheus.url})
    try:
        assert sim.requests[("list", "deployments", "")] >= 1, "ready only after the informers' first list"
        assert sim.requests[("watch", "deployments", "")] >= 1
        pods = sorted(p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector="app=llm-inference"))
        body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, p, "server") for p in pods])
        sim.reset_counters()
        prometheus.observe(body)
        request = urllib.request.Request(f"{child.url}/alerts", data=json.dumps(body).encode(), method="POST",
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            outcomes = json.loads(answer.read())["outcomes"]
        assert {(o["result"], o["from"], o["to"]) for o in outcomes} == {("applied", 4, 3)}, child.tail()
        assert not [k for k in sim.requests if k[0] == "get" and k[1] in WORKLOAD_READS]
    finally:
        child.stop(timeout=15)
        prometheus.stop()
    assert child.popen.returncode is not None
