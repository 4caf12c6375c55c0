"""List+watch loops that keep the `Store` (reactor/cluster/cache.py) current, the way Kubernetes controllers read.

One `Informer` per (kind, scope): list, then watch from the list's resourceVersion with BOOKMARKs, resume
from the last version seen when a watch ends, list again on 410 Gone / Expired (an answer or an ERROR event
in the stream), and back off on errors. `Informers` runs them on daemon threads, reports whether every one
has finished its first list (readiness), and stops them. Nothing here decides or writes anything: the
store only saves reads, and every write stays conditional on the resourceVersion it was decided on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Protocol

from reactor.cluster.cache import ALL, Obj, Store
from reactor.cluster.kube import Expired
from reactor.cluster.trim import Encoded, decode_page
from reactor.core.backoff import doubling
from reactor.core.errors import PermanentError, TemporaryError

log = logging.getLogger(__name__)

NAMESPACED = ("Deployment", "StatefulSet", "CronJob", "ReplicaSet", "Job",
              "LimitRange", "ResourceQuota", "HorizontalPodAutoscaler")
CLUSTER_SCOPED = ("PriorityClass",)
CACHED = frozenset(NAMESPACED + CLUSTER_SCOPED)
WATCH_SECONDS = 300
MAX_BACKOFF = 30.0
# A watch that ends sooner than this without a reason is treated as an error (waited on), not resumed at once.
SHORT_WATCH = 1.0
# Lists at once. One at a time left both sides idle in turn: the API server encodes a page while the reactor waits,
# then the reactor decodes it while the server waits (measured at 100,000 objects: 29 s waiting on the server, 31 s
# decoding, one after the other). Two keep both busy (a page is now decoded in a few ms, reactor/cluster/trim.py
# `decode_page`, so the server's encoding is the longer side); each holds one page (500 objects) at a time, given
# back after each list (`after_list`). Their requests are paced by `kube.qps` like any other.
LISTS = 2


class Source(Protocol):
    """What an informer reads from: the gateway (reactor/cluster/kube/) or a fake event source in tests."""

    def list_page(self, kind: str, namespace: str, *,
                  decode: Callable[[bytes], Obj] | None = None) -> tuple[Iterable[Obj | Encoded], str]: ...

    def watch_events(self, kind: str, namespace: str, version: str, seconds: int) -> Iterable[Obj]: ...

    def end_watches(self) -> None: ...


class Informer:
    """Keeps one (kind, scope) of the store current; `run` returns when `stop` is set."""

    def __init__(self, source: Source, store: Store, kind: str, scope: str, *, watch_seconds: int = WATCH_SECONDS,
                 clock: Callable[[], float] = time.monotonic, listing: AbstractContextManager[Any] | None = None,
                 after_list: Callable[[], object] | None = None) -> None:
        self.kind, self.scope = kind, scope
        self._listing = listing or threading.Lock()
        self._after_list = after_list
        self._source, self._store, self._seconds, self._clock = source, store, watch_seconds, clock
        self.version: str | None = None  # None: list before watching
        self._listed: str | None = None  # the version the last list answered
        self.relists = 0
        self.error = ""  # the refusal that stopped this informer following, "" while it follows

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                if self.version is None:
                    self.relist()
                delivered, lasted = self._watch(stop)
                # A stream that ends at once is an error (waited on, growing); one that brought events, one wait.
                failures = 0 if lasted else (1 if delivered else failures + 1)
                if lasted or delivered:
                    self.error = ""  # following again
            except Expired:
                log.info("watch expired; listing again", extra={"kind": self.kind, "namespace": self.scope})
                # Expired again right after a list is a server in trouble, not a compaction: wait before listing.
                failures = failures + 1 if self.version == self._listed else 0
                self.version = None
            except (TemporaryError, PermanentError) as e:
                if stop.is_set():
                    return  # stopping closed the stream (`end_watches`): an end asked for, not a failure to report
                failures += 1
                self._failed(e)
            if failures:
                stop.wait(doubling(failures, first=0.2, cap=MAX_BACKOFF))

    def _failed(self, e: TemporaryError | PermanentError) -> None:
        log.warning("list/watch failed", extra={"kind": self.kind, "namespace": self.scope, "error": str(e)})
        if isinstance(e, PermanentError):
            # Refused (403 after an RBAC change, say): the cache can no longer follow, so reads go to the API
            # and readiness names the refusal until a list succeeds again.
            self.error = str(e)
            self._store.unsync(self.kind, self.scope)
            self.version = None

    def relist(self) -> None:
        # At most `LISTS` lists at once (the semaphore `Informers` shares): a page being parsed is many times its
        # cached size, so every list side by side adds its page to the peak.
        with self._listing:
            items, version = self._source.list_page(self.kind, self.scope, decode=partial(decode_page, self.kind))
            self._store.replace(self.kind, self.scope, items)
            del items
            if self._after_list is not None:
                self._after_list()  # give the pages' freed memory back (reactor/app/arenas.py)
        self.version, self._listed, self.relists = version, version, self.relists + 1

    def _watch(self, stop: threading.Event) -> tuple[int, bool]:
        """One watch stream, applied: how many events it brought, and whether it lasted long enough to be healthy."""
        started, delivered = self._clock(), 0
        events = iter(self._source.watch_events(self.kind, self.scope, self.version or "", self._seconds))
        for event in _until(stop, events):
            self._apply(event)
            delivered += 1
        return delivered, self._clock() - started >= SHORT_WATCH

    def _apply(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if not isinstance(obj, dict):
            raise TemporaryError(f"watch {self.kind}: an event whose object is not an object")
        if kind == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise Expired(str(obj.get("message") or "resourceVersion too old"), status=410)
            raise TemporaryError(f"watch {self.kind}: {obj.get('code')} {obj.get('message')}")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._store.apply(self.kind, kind, obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") and version:
            self.version = str(version)


def _until(stop: threading.Event, events: Iterator[Obj]) -> Iterator[Obj]:
    for event in events:
        if stop.is_set():
            return
        yield event


class Informers:
    """Every informer of the reactor on its own daemon thread; ready once each has listed once."""

    def __init__(self, source: Source, allow: Iterable[str], deny: Iterable[str] = (), *,
                 watch_seconds: int = WATCH_SECONDS, after_list: Callable[[], object] | None = None,
                 lists: int = LISTS) -> None:
        self.store = Store(CACHED)
        listing = threading.BoundedSemaphore(lists)
        self.informers = [Informer(source, self.store, kind, scope, watch_seconds=watch_seconds, listing=listing,
                                   after_list=after_list) for kind, scope in scopes(allow, deny)]
        self._source = source
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for informer in self.informers:
            name = f"informer-{informer.kind}-{informer.scope or 'all'}"
            thread = threading.Thread(target=informer.run, args=(self._stop,), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 2.0) -> None:
        """End every loop: the stop is set, then the open watch streams are ended so no read stays blocked."""
        self._stop.set()
        self._source.end_watches()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def run_once(self) -> object:
        """Each informer lists once on the caller's thread (its loop's first pass): the store filled, no thread."""
        for informer in self.informers:
            informer.relist()
        return len(self.informers)

    def unsynced(self) -> list[str]:
        return [f"{i.kind} in {i.scope or 'all namespaces'}" + (f" ({i.error})" if i.error else "")
                for i in self.informers if i.error or not self.store.synced_for(i.kind, i.scope)]

    def synced_kinds(self) -> dict[str, bool]:
        """Per cached kind: has every informer of it listed, with no watch failing now (reactor_cache_synced)?"""
        synced: dict[str, bool] = {}
        for i in self.informers:
            ok = not i.error and self.store.synced_for(i.kind, i.scope)
            synced[i.kind] = synced.get(i.kind, True) and ok
        return synced

    def check(self) -> None:
        """Readiness: raises TemporaryError until every informer has finished its first list."""
        waiting = self.unsynced()
        if waiting:
            raise TemporaryError(f"cache not synced yet: {', '.join(waiting[:5])}"
                                 + (f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""))


def scopes(allow: Iterable[str], deny: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(kind, scope) pairs to list+watch: `*` in allow watches cluster-wide; else each allowed, not denied one."""
    allowed, denied = set(allow), set(deny)
    spaces = [ALL] if "*" in allowed else sorted(allowed - denied - {"*"})
    pairs = [(kind, ns) for kind in NAMESPACED for ns in spaces]
    return pairs + [(kind, ALL) for kind in CLUSTER_SCOPED]
