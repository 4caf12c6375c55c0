"""The watch-fed cache (reactor/cluster/cache.py, reactor/cluster/informer.py) against a fake event source.

The fake keeps a versioned history of one kind's objects the way kube-apiserver's watch cache does: a list
answers the objects and the current resourceVersion; a watch from version V sends every later event, then a
BOOKMARK, and ends after `seconds`; a watch from a version older than its window is 410 Expired (as an
answer, or as an ERROR event in the stream, as kube-apiserver sends it once a stream is open).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor.cluster.cache import ALL, MISS, Store
from reactor.cluster.informer import CACHED, Informer, Informers, scopes
from reactor.cluster.kube import Expired
from reactor.core.errors import PermanentError, TemporaryError
from tests.support import eventually as wait_for

Obj = dict[str, Any]


def deployment(name: str, namespace: str = "ml", **extra: Any) -> Obj:
    return {"kind": "Deployment", "metadata": {"name": name, "namespace": namespace,
                                               "managedFields": [{"manager": "kubectl"}]}, **extra}


class FakeSource:
    """An in-memory API server history for the informer: versions, events, a window, failures on demand."""

    def __init__(self) -> None:
        self.version = 10
        self.objects: dict[tuple[str, str], Obj] = {}
        self.events: list[tuple[int, Obj]] = []
        self.oldest = 0  # watches from a version below this are expired
        self.expire_as_event = False
        self.list_failures = 0
        self.lists = 0
        self.watches: list[str] = []
        self._cond = threading.Condition()

    def change(self, kind: str, obj: Obj) -> None:
        with self._cond:
            self.version += 1
            meta = obj["metadata"]
            key = (meta["namespace"], meta["name"])
            stored = {**obj, "metadata": {**meta, "resourceVersion": str(self.version)}}
            if kind == "DELETED":
                self.objects.pop(key, None)
            else:
                self.objects[key] = stored
            self.events.append((self.version, {"type": kind, "object": stored}))
            self._cond.notify_all()

    def end_watches(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget the history: every watch from an older version is now Expired."""
        with self._cond:
            self.oldest = self.version
            self.events.clear()

    def list_page(self, kind: str, namespace: str, *, decode: object = None) -> tuple[list[Obj], str]:
        with self._cond:
            self.lists += 1
            if self.list_failures:
                self.list_failures -= 1
                raise TemporaryError("list deployments: 503 ServiceUnavailable")
            items = [o for (ns, _), o in self.objects.items() if namespace in (ALL, ns)]
            return items, str(self.version)

    def watch_events(self, kind: str, namespace: str, version: str, seconds: int) -> Iterator[Obj]:
        self.watches.append(version)
        if int(version) < self.oldest and not self.expire_as_event:
            raise Expired("watch deployments: 410 Expired: too old resource version", status=410)
        return self._stream(int(version), seconds)

    def _stream(self, version: int, seconds: float) -> Iterator[Obj]:
        if version < self.oldest:
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                               "message": "too old resource version"}}
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with self._cond:
                fresh = [e for v, e in self.events if v > version]
                if not fresh:
                    self._cond.wait(0.05)
            for event in fresh:
                version = int(event["object"]["metadata"]["resourceVersion"])
                yield event
        yield {"type": "BOOKMARK", "object": {"kind": "Deployment", "metadata": {"resourceVersion": str(version)}}}


def held(store: Store, name: str) -> Obj:
    """The cached Deployment `name` in namespace ml, or {} when the store holds none (or cannot say)."""
    found = store.lookup("Deployment", "ml", name)
    return found if isinstance(found, dict) else {}


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> None:
    """At the fake source's pace: 5 s by default, checked every 20 ms."""
    wait_for(check, seconds, every=0.02)


@pytest.fixture
def running() -> Iterator[Callable[[Informer], None]]:
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(informer: Informer) -> None:
        thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    stop.set()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()


def test_the_store_answers_object_absent_or_miss() -> None:
    store = Store(frozenset({"Deployment"}))
    assert store.lookup("Deployment", "ml", "a") is MISS  # not listed yet: ask the API
    store.replace("Deployment", "ml", [deployment("a")])
    assert store.lookup("Deployment", "ml", "a") == {"kind": "Deployment", "metadata": {"name": "a", "namespace": "ml"}}
    assert store.lookup("Deployment", "ml", "b") is None  # synced namespace: does not exist
    assert store.lookup("Deployment", "other", "a") is MISS  # namespace not watched
    assert store.lookup("Pod", "ml", "a") is MISS  # kind not cached


def test_a_cluster_wide_list_answers_for_every_namespace() -> None:
    store = Store(frozenset({"Deployment"}))
    store.replace("Deployment", ALL, [deployment("a", "x"), deployment("b", "y")])
    assert store.lookup("Deployment", "y", "b") is not None
    assert store.lookup("Deployment", "x", "b") is None
    assert [o["metadata"]["name"] for o in store.objects("Deployment", "x")] == ["a"]  # type: ignore[union-attr]


def test_first_list_then_watch_applies_added_modified_deleted(running: Callable[[Informer], None]) -> None:
    source, store = FakeSource(), Store(CACHED)
    source.change("ADDED", deployment("a"))
    informer = Informer(source, store, "Deployment", "ml", watch_seconds=1)
    running(informer)
    eventually(lambda: store.synced_for("Deployment", "ml"))
    source.change("ADDED", deployment("b"))
    source.change("MODIFIED", deployment("a", spec={"replicas": 3}))
    source.change("DELETED", deployment("b"))
    eventually(lambda: held(store, "a").get("spec") == {"replicas": 3})
    eventually(lambda: store.lookup("Deployment", "ml", "b") is None and informer.version == str(source.version))
    assert source.lists == 1  # watched from the list's version, never listed again


def test_a_watch_that_ends_resumes_from_the_bookmark_without_listing(running: Callable[[Informer], None]) -> None:
    source, store = FakeSource(), Store(CACHED)
    informer = Informer(source, store, "Deployment", "ml", watch_seconds=1)
    running(informer)
    eventually(lambda: len(source.watches) >= 3)  # three 1-second streams, each resumed
    assert source.lists == 1
    assert set(source.watches) == {str(source.version)}


@pytest.mark.parametrize("as_event", [False, True], ids=["410-answer", "410-error-event"])
def test_an_expired_watch_lists_again_and_catches_up(running: Callable[[Informer], None], as_event: bool) -> None:
    source, store = FakeSource(), Store(CACHED)
    source.change("ADDED", deployment("a"))
    informer = Informer(source, store, "Deployment", "ml", watch_seconds=1)
    running(informer)
    eventually(lambda: store.synced_for("Deployment", "ml"))
    with source._cond:  # changes the informer never sees as events: it must relist to learn them
        source.expire_as_event = as_event
        source.version += 5
        source.objects[("ml", "a")] = deployment("a", spec={"replicas": 7})
        source.objects[("ml", "c")] = deployment("c")
        source.oldest = source.version  # a watch from any version before this one is Expired
        source.events.clear()
    eventually(lambda: source.lists == 2, seconds=6)
    eventually(lambda: store.lookup("Deployment", "ml", "c") is not None)
    assert held(store, "a").get("spec") == {"replicas": 7}
    assert informer.relists == 2


def test_list_errors_back_off_and_recover(running: Callable[[Informer], None]) -> None:
    source, store = FakeSource(), Store(CACHED)
    source.list_failures = 2
    running(Informer(source, store, "Deployment", "ml", watch_seconds=1))
    eventually(lambda: store.synced_for("Deployment", "ml"), seconds=6)
    assert source.lists == 3


def test_readiness_waits_for_every_informer_first_list() -> None:
    source = FakeSource()
    informers = Informers(source, ["ml"], watch_seconds=1)
    with pytest.raises(TemporaryError, match="cache not synced yet: Deployment in ml"):
        informers.check()
    source.list_failures = 1
    informers.start()
    try:
        eventually(lambda: not informers.unsynced(), seconds=6)
        informers.check()
    finally:
        informers.stop(timeout=5)
    assert all(not t.is_alive() for t in informers._threads)


def test_scopes_follow_the_allowed_namespaces() -> None:
    assert ("Deployment", ALL) in scopes(["*"], ["kube-system"])
    pairs = scopes(["ml", "b", "kube-system"], ["kube-system"])
    assert ("ReplicaSet", "ml") in pairs and ("Job", "b") in pairs
    assert not [p for p in pairs if p[1] == "kube-system"]
    assert ("PriorityClass", ALL) in pairs and ("HorizontalPodAutoscaler", "ml") in pairs


def test_a_refused_watch_unsyncs_and_readiness_names_the_refusal() -> None:
    """A 403 (an RBAC grant taken away) stops the cache following: reads go to the API, /readyz says why."""
    source = FakeSource()
    refusal = PermanentError('watch deployments: 403 Forbidden: cannot watch resource "deployments"', status=403)

    def refused(*_: object) -> Iterator[Obj]:
        raise refusal

    source.watch_events = refused  # type: ignore[method-assign,assignment]
    informers = Informers(source, ["ml"], watch_seconds=1)
    informers.start()
    try:
        eventually(lambda: any("403 Forbidden" in u for u in informers.unsynced()))
        with pytest.raises(TemporaryError, match="cannot watch resource"):
            informers.check()
    finally:
        informers.stop(timeout=5)


def test_a_malformed_event_is_an_error_that_is_retried_not_the_end_of_the_informer(
        running: Callable[[Informer], None]) -> None:
    source, store = FakeSource(), Store(CACHED)
    streams = source.watch_events
    calls: list[str] = []

    def junk_first(kind: str, namespace: str, version: str, seconds: int) -> Iterator[Obj]:
        calls.append(version)
        if len(calls) == 1:
            return iter([{"type": "ADDED", "object": ["not", "an", "object"]}])
        return streams(kind, namespace, version, seconds)

    source.watch_events = junk_first  # type: ignore[method-assign]
    running(Informer(source, store, "Deployment", "ml", watch_seconds=1))
    eventually(lambda: len(calls) >= 2)
    source.change("ADDED", deployment("late"))
    eventually(lambda: held(store, "late") != {})
