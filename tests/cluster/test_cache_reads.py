"""The watch cache's reads take no lock (reactor/cluster/cache.py `Store.lookup`): a request thread must never see an
object missing while an informer relists a kind that still holds it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from reactor.cluster.cache import ALL, Store

pytestmark = pytest.mark.unit


def deployment(namespace: str, name: str) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": namespace, "name": name},
            "spec": {"replicas": 1}}


@pytest.fixture
def switching() -> Iterator[None]:
    """Switch threads as often as the interpreter can, so a window between two steps of a write is met."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_a_relist_never_shows_a_reader_the_kind_emptied(switching: None) -> None:
    store = Store(frozenset({"Deployment"}))
    objects = [deployment(f"team-{i % 10}", f"model-{i}") for i in range(200)]
    store.replace("Deployment", ALL, objects)
    missing: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            for i in (0, 57, 199):
                if store.lookup("Deployment", f"team-{i % 10}", f"model-{i}") is None:
                    missing.append(f"model-{i}")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(300):
            store.replace("Deployment", ALL, objects)  # the same objects, listed again
    finally:
        done.set()
        reader.join()
    assert missing == []
    assert store.lookup("Deployment", "team-7", "model-57") == deployment("team-7", "model-57")
