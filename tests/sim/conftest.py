"""Fixtures: a started simulator per test and the official client pointed at it over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import gpu_node


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster().start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.apply([gpu_node(f"gpu-node-{i}") for i in (1, 2, 3, 4)])
        yield cluster


@pytest.fixture
def client(sim: SimCluster) -> Iterator[k8s.ApiClient]:
    config = k8s.Configuration(host=sim.url)
    with k8s.ApiClient(config) as api_client:
        yield api_client


@pytest.fixture
def core(client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(client)


@pytest.fixture
def apps(client: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(client)
