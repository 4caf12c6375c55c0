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


class _Api:
    """Stands for the gateway: what the reader asks the API server (after a write, or for a kind not cached)."""

    def __init__(self, obj: dict[str, object]) -> None:
        self.obj, self.gets = obj, 0

    def get(self, kind: str, namespace: str, name: str, adapter: object) -> dict[str, object]:
        self.gets += 1
        return self.obj


def test_a_notification_decodes_a_cached_object_once_and_reads_the_api_after_forgetting_it() -> None:
    """The pods of one workload each lead to it: the notification's reader decodes it from the cache once and hands
    every pod the same copy. After a write (`forget`), the API server's copy, never the cached one."""
    from reactor.integrations.adapters.base import Adapters
    from reactor.resolve.owners import Reader

    store = Store(frozenset({"Deployment"}))
    store.replace("Deployment", ALL, [deployment("team-0", "model-0")])
    fresh = {**deployment("team-0", "model-0"), "spec": {"replicas": 2}}
    api = _Api(fresh)
    reader = Reader(api, cache=store, adapters=Adapters())  # type: ignore[arg-type]
    first = reader.get("Deployment", "team-0", "model-0")
    assert first is reader.get("Deployment", "team-0", "model-0") and first == deployment("team-0", "model-0")
    assert api.gets == 0
    reader.forget("Deployment", "team-0", "model-0")
    assert reader.get("Deployment", "team-0", "model-0") == fresh and api.gets == 1
    assert Reader(api, cache=store, adapters=Adapters()).get(  # type: ignore[arg-type]
        "Deployment", "team-0", "model-0") is not first  # another notification decodes its own
