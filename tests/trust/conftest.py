"""Fixtures of the trust-boundary suite: the deployed cluster with a tenant, and the deployed reactor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.deploy.deploy_helpers import render
from tests.support import Reactor
from tests.trust.tenant import deployed_cluster, deployed_reactor, tenant_client


@pytest.fixture(scope="session")
def reactor_objects() -> list[dict[str, Any]]:
    return render("reactor")


@pytest.fixture
def sim(reactor_objects: list[dict[str, Any]]) -> Iterator[SimCluster]:
    cluster = deployed_cluster(reactor_objects)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def tenant(sim: SimCluster) -> Iterator[k8s.ApiClient]:
    with tenant_client(sim) as api:
        yield api


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = deployed_reactor(sim, token_file)
    try:
        yield r
    finally:
        r.service.kube.close()
