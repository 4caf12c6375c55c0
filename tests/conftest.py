"""Fixtures: the embedded cluster over real HTTP, and the reactor assembled against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import freezegun
import pytest

from reactor.sim import SimCluster
from tests.support import HERE, TOKEN, Reactor, build_reactor, make_settings

# The official client validates calls with pydantic, which cannot build a schema for freezegun's
# FakeDatetime: freezegun must leave those libraries' modules alone (the reactor still sees the fake clock).
freezegun.configure(extend_ignore_list=["kubernetes", "pydantic", "pydantic_core", "urllib3"])


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster().start()
    cluster.load_manifests((HERE / "fixtures" / "cluster.yaml").read_text())
    cluster.settle()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = build_reactor(sim, make_settings(token_file))
    try:
        yield r
    finally:
        r.service.kube.close()
