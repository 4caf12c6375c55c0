"""`reactor_kube_requests_total{code}` counts the status the API server answered: 201 Created for a create
(kube-apiserver's create handler answers 201), 200 for reads, the error's code for a refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reactor.cluster.kube import KubeGateway
from reactor.core.errors import PermanentError
from reactor.core.metrics import Metrics
from reactor_sim import SimCluster
from tests.support import NAMESPACE, make_settings


def _event(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "llm-inference."},
            "involvedObject": {"kind": "Deployment", "name": "llm-inference", "namespace": namespace},
            "reason": "GPUReactor", "message": "m", "type": "Normal"}


def _count(registry: CollectorRegistry, verb: str, resource: str, code: str) -> float:
    labels = {"verb": verb, "resource": resource, "code": code}
    return registry.get_sample_value("reactor_kube_requests_total", labels) or 0.0


def test_requests_are_counted_by_the_status_the_server_answered(sim: SimCluster, token_file: Path) -> None:
    """A created Event counts as 201 (never 200), a read as 200, a refused create (422: the Event's
    object is in another namespace) as 422."""
    registry = CollectorRegistry()
    kube = KubeGateway.for_url(sim.url, make_settings(token_file).kube, Metrics(registry))
    try:
        kube.create_event(NAMESPACE, _event(NAMESPACE))
        kube.get("Deployment", NAMESPACE, "llm-inference")
        with pytest.raises(PermanentError):
            kube.create_event(NAMESPACE, _event("other-team"))
    finally:
        kube.close()
    assert _count(registry, "create", "events", "201") == 1
    assert _count(registry, "create", "events", "200") == 0
    assert _count(registry, "create", "events", "422") == 1
    assert _count(registry, "get", "deployments", "200") == 1
