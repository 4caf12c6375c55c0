"""Kubernetes Events, posted off the request path and correlated as client-go's recorder does.

An Event is a note for `kubectl describe`, never part of a decision: the webhook must answer Alertmanager
whatever the Events API does. So `EventPoster.post` only puts the Event on a bounded queue (never blocks;
a full queue drops it, counted and logged) and one background thread sends them, as kopf does
(kopf/_core/engines/posting.py: `enqueue` puts, the `poster` task drains). `close` drains what is left,
within a deadline, when the process stops.

Before sending, the Event goes through a `Correlator`, the two steps of client-go's EventCorrelator
(tools/record/events_cache.go) that keep repeats from piling up: the same Event again (same source,
object, type, reason and message: `getEventKey`) is not created again but PATCHed onto the first one
with its `count` one higher and a new `lastTimestamp` (`eventLogger.eventObserve`, then
`recordToSink`'s patch; a 404 on that patch creates it anew); and more than `max_events` Events of one
object and reason that differ only by message within `interval` are folded into one
"(combined from similar events): ..." Event, itself counted (`EventAggregator.EventAggregate`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from reactor.cluster.kube import NotFound
from reactor.core.errors import ReactorError
from reactor.core.model import Kind, WorkloadRef

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000  # Events waiting to be sent; beyond it one is dropped (and counted), never waited for
CACHE_SIZE = 4096  # client-go's maxLruCacheEntries
AGGREGATE_MAX_EVENTS = 10  # client-go's defaultAggregateMaxEvents
AGGREGATE_INTERVAL = 600.0  # seconds: client-go's defaultAggregateIntervalInSeconds
COMBINED = "(combined from similar events): "  # client-go's EventAggregatorByReasonMessageFunc
_STOP = object()
API_VERSIONS: dict[str, str] = {
    Kind.DEPLOYMENT: "apps/v1", Kind.STATEFULSET: "apps/v1", Kind.CRONJOB: "batch/v1", Kind.JOB: "batch/v1",
}

Obj = dict[str, Any]


class EventSink(Protocol):
    """Where Events go: the gateway (reactor/cluster/kube/) or a test double."""

    def create_event(self, namespace: str, body: Obj) -> Obj: ...

    def patch_event(self, namespace: str, name: str, body: Obj) -> Obj: ...


@dataclass(slots=True)
class _Seen:
    """client-go's eventLog: how often an Event was sent, under which name, since when."""

    count: int
    first: str
    name: str


@dataclass(slots=True)
class _Similar:
    """client-go's aggregateRecord: the messages seen for one (object, reason) and when, last."""

    messages: set[str]
    last: float


def event_key(body: Mapping[str, Any]) -> str:
    """client-go getEventKey: source, involved object, type, reason and message."""
    return _joined(body, ("component", "host"), ("kind", "namespace", "name", "fieldPath", "uid", "apiVersion"),
                   ("type", "reason", "message"))


def _aggregate_key(body: Mapping[str, Any]) -> str:
    """client-go EventAggregatorByReasonFunc: the key without the message."""
    return _joined(body, ("component", "host"), ("kind", "namespace", "name", "uid", "apiVersion"),
                   ("type", "reason", "reportingController", "reportingInstance"))


def _joined(body: Mapping[str, Any], source: tuple[str, ...], involved: tuple[str, ...],
            own: tuple[str, ...]) -> str:
    """The fields named of the Event's source, of its involved object and of its own, in that order, joined as
    client-go joins a key ("" for one that is absent)."""
    src, obj = body.get("source") or {}, body.get("involvedObject") or {}
    return "\x00".join(str(x) for x in (*(src.get(f, "") for f in source), *(obj.get(f, "") for f in involved),
                                        *(body.get(f, "") for f in own)))


class Correlator:
    """Decides, for each Event, whether it is created or is a repeat to count on an earlier one. Bounded (LRU)."""

    def __init__(self, *, size: int = CACHE_SIZE, max_events: int = AGGREGATE_MAX_EVENTS,
                 interval: float = AGGREGATE_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.size, self.max_events, self.interval, self._clock = size, max_events, interval, clock
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._similar: OrderedDict[str, _Similar] = OrderedDict()
        self._lock = threading.Lock()

    def correlate(self, body: Obj) -> tuple[Obj, str, _Seen | None]:
        """(the Event to send, its key, the earlier one it repeats or None): a repeat is sent as a count."""
        with self._lock:
            body, key = self._aggregate(body)
            seen = self._seen.get(key)
            if seen is None:
                return body, key, None
            self._seen.move_to_end(key)
            return body, key, _Seen(seen.count + 1, seen.first, seen.name)

    def sent(self, key: str, written: Mapping[str, Any]) -> None:
        """What the API server holds now (client-go `UpdateState`): the next repeat counts on it."""
        meta = written.get("metadata") or {}
        with self._lock:
            self._seen[key] = _Seen(int(written.get("count") or 1), str(written.get("firstTimestamp") or ""),
                                    str(meta.get("name") or ""))
            self._seen.move_to_end(key)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def forget(self, key: str) -> None:
        with self._lock:
            self._seen.pop(key, None)

    def _aggregate(self, body: Obj) -> tuple[Obj, str]:
        now = self._clock()
        group = _aggregate_key(body)
        record = self._similar.get(group)
        if record is None or now - record.last > self.interval:
            record = _Similar(set(), now)
        record.messages.add(str(body.get("message", "")))
        record.last = now
        self._similar[group] = record
        self._similar.move_to_end(group)
        while len(self._similar) > self.size:
            self._similar.popitem(last=False)
        if len(record.messages) < self.max_events:
            return body, event_key(body)
        record.messages.pop()  # client-go: `localKeys.PopAny()`, the set never grows past the threshold
        combined = {**body, "message": (COMBINED + str(body.get("message", "")))[:1024]}
        return combined, group


class EventPoster:
    """The bounded queue and its one sending thread (started on the first Event)."""

    def __init__(self, sink: EventSink, *, size: int = QUEUE_SIZE, correlator: Correlator | None = None,
                 dropped: Callable[[], None] | None = None) -> None:
        self.sink = sink
        self.correlator = correlator or Correlator()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self._dropped = dropped or (lambda: None)
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._closed = False

    def post(self, body: Obj) -> bool:
        """Queue one Event; False when it was dropped (the queue is full, or the poster closed). Never blocks."""
        if self._closed:
            return False
        self._ensure_thread()
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self._dropped()
            log.warning("event dropped: the queue is full", extra={"reason": body.get("reason"),
                                                                   "workload": _named(body)})
            return False
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued Event was sent (or given up on); False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking Events; send what is queued within `timeout`, then stop the thread."""
        self._closed = True
        if self._thread is None:
            return
        self.flush(timeout)
        with contextlib.suppress(queue.Full):  # still sending after the deadline: a daemon, it ends with the process
            self._queue.put_nowait(_STOP)
        self._thread.join(max(0.1, timeout / 5))

    # --- as a background part (reactor/app/background.py) ------------------------------------------------------

    def start(self) -> None:
        """The sending thread now (otherwise it starts with the first Event)."""
        self._ensure_thread()

    def stop(self) -> None:
        self.close()

    def run_once(self) -> object:
        """Send what is queued now, on the caller's thread (no sending thread running): how many were sent."""
        sent = 0
        while True:
            try:
                body = self._queue.get_nowait()
            except queue.Empty:
                return sent
            try:
                if body is not _STOP:
                    sent += bool(self.send(body))
            finally:
                self._queue.task_done()

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._start:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="reactor-events", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            try:
                if body is _STOP:
                    return
                self.send(body)
            except Exception:  # noqa: BLE001 - the thread must outlive one bad Event
                log.exception("event not recorded")
            finally:
                self._queue.task_done()

    def send(self, body: Obj) -> bool:
        """Create the Event, or count it on the earlier one it repeats (client-go recordToSink)."""
        namespace = str((body.get("metadata") or {}).get("namespace") or "")
        body, key, repeat = self.correlator.correlate(body)
        try:
            if repeat is not None and repeat.name:
                try:
                    written = self.sink.patch_event(namespace, repeat.name, {
                        "count": repeat.count, "lastTimestamp": body.get("lastTimestamp"),
                        "message": body.get("message")})
                except NotFound:  # deleted since (an Event's TTL): create it anew
                    self.correlator.forget(key)
                    written = self.sink.create_event(namespace, body)
            else:
                written = self.sink.create_event(namespace, body)
        except ReactorError as e:
            log.warning("event not recorded", extra={"workload": _named(body), "reason": body.get("reason"),
                                                     "error": str(e)})
            return False
        self.correlator.sent(key, written)
        return True


def _named(body: Mapping[str, Any]) -> str:
    obj = body.get("involvedObject") or {}
    return f"{obj.get('kind')}/{obj.get('namespace')}/{obj.get('name')}"


def workload_event(ref: WorkloadRef, obj: Mapping[str, Any], *, reason: str, message: str, now: datetime,
                   warning: bool = False) -> Obj:
    """A core v1 Event on the workload `obj` (as read or as written), for `kubectl describe`."""
    meta = obj.get("metadata") or {}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
        "involvedObject": {
            "apiVersion": _api_version(ref.kind, obj),
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": "gpu-reactor"},
        "reportingComponent": "gpu-reactor",
        "reportingInstance": socket.gethostname()[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _api_version(kind: str, obj: Mapping[str, Any]) -> str:
    """The workload's apiVersion as the server answered it (an operator's resource), else the built-in kind's."""
    answered = obj.get("apiVersion")
    return answered if isinstance(answered, str) and answered else API_VERSIONS.get(kind, "v1")
