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
from tests.trust.tenant import BOOSTING, MinuteClock, deployed, deployed_cluster, tenant_client


@pytest.fixture(scope="session")
def reactor_objects() -> list[dict[str, Any]]:
    return render("reactor")


@pytest.fixture
def sim(reactor_objects: list[dict[str, Any]]) -> Iterator[SimCluster]:
    with deployed_cluster(reactor_objects) as cluster:
        yield cluster


@pytest.fixture
def tenant(sim: SimCluster) -> Iterator[k8s.ApiClient]:
    with tenant_client(sim) as api:
        yield api


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    with deployed(sim, token_file) as r:
        yield r


@pytest.fixture
def boosting(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    """The deployed reactor acting one step after another (BOOSTING) on a clock a minute on at each reading."""
    with deployed(sim, token_file, clock=MinuteClock(), **BOOSTING) as r:
        yield r
