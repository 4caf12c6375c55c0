"""Smoke test of the real pipeline: fake exporter -> Prometheus (fast rules) -> Alertmanager -> webhook."""

from __future__ import annotations

import time

import pytest

from tests.promstack.conftest import WEBHOOK_TOKEN
from tests.promstack.exporter import FakeDcgmExporter
from tests.promstack.stack import Delivery, PromStack, WebhookSink

pytestmark = pytest.mark.promstack

NS, POD, CONTAINER = "ml-workloads", "smoke-6d5f7c9b8-x7k2p", "server"


def underutilized_for_pod(delivery: Delivery) -> bool:
    return delivery.body.get("status") == "firing" and any(
        a["labels"].get("alertname") == "GPUUnderutilized" and a["labels"].get("pod") == POD and a["status"] == "firing"
        for a in delivery.body.get("alerts", [])
    )


def test_low_utilization_reaches_the_webhook_with_the_bearer_token(
    stack: PromStack, dcgm_exporter: FakeDcgmExporter, webhook_sink: WebhookSink
) -> None:
    dcgm_exporter.set_pod(NS, POD, CONTAINER, gpus=2, utilization=0.62)
    # Warm: the busy pod is scraped, recorded, and labelled by the workload (exported_* copied back).
    stack.wait_for_query(f'gpu_reactor:container_gpu_utilization:ratio{{namespace="{NS}",pod="{POD}"}} > 0.6', timeout=20)

    # The scrape kept the exporter's own target labels: the workload came as exported_*.
    assert stack.query(f'DCGM_FI_DEV_GPU_UTIL{{exported_pod="{POD}",namespace="gpu-operator"}}')

    changed = time.monotonic()
    dcgm_exporter.set_pod(NS, POD, CONTAINER, utilization=0.10)
    delivery = webhook_sink.wait_for(underutilized_for_pod, timeout=20)
    delay = delivery.at - changed
    print(f"\nmetric change -> GPUUnderutilized webhook: {delay:.1f} s")

    assert delivery.authorization == f"Bearer {WEBHOOK_TOKEN}"
    assert delivery.body["version"] == "4"
    assert delivery.body["receiver"] == "gpu-reactor"
    assert delivery.body["groupLabels"] == {"alertname": "GPUUnderutilized", "namespace": NS}
    (alert,) = [a for a in delivery.body["alerts"] if a["labels"]["pod"] == POD]
    assert alert["labels"]["container"] == CONTAINER
    assert alert["labels"]["reactor"] == "gpu"
    assert "exported_pod" not in alert["labels"]  # the exporter's own namespace never leaks in
    assert alert["annotations"]["gpus"] == "2"
    assert alert["annotations"]["idle_gpus"] == "0"
    assert 0.05 < float(alert["annotations"]["value"]) < 0.30
    assert delay < 20
