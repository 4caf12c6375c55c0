"""What the probe listener answers: `/healthz`, `/readyz` and `/metrics`, as plain values.

The answers are built here, apart from any server, so the probe server (reactor/app/probe_server.py)
and the tests share one definition. Nothing here opens a socket or touches the webhook: a probe
must answer while every webhook thread is busy or held by a slow client.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reactor.core.errors import ReactorError
from reactor.core.metrics import Metrics

READY_CACHE_SECONDS = 5.0
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Readiness:
    """`/readyz`: the API server answered within the last few seconds.

    Cached, and refreshed by one caller at a time: a burst of probes (or of hostile requests on the
    probe port) costs the API server one request per `READY_CACHE_SECONDS`, and while that request
    is slow the others get the last known answer instead of waiting for it.
    """

    def __init__(self, probe: Callable[[], Any]) -> None:
        self._probe = probe
        self._checked = float("-inf")
        self._ok = False
        self._error = "not checked yet"
        self._refreshing = False
        self._lock = threading.Lock()

    def check(self) -> tuple[bool, str]:
        with self._lock:
            if self._refreshing or time.monotonic() - self._checked < READY_CACHE_SECONDS:
                return self._ok, self._error
            self._refreshing = True
        ok, error = False, "the readiness check failed"
        try:
            self._probe()
            ok, error = True, ""
        except ReactorError as e:
            error = str(e)
        finally:
            with self._lock:
                self._ok, self._error, self._checked, self._refreshing = ok, error, time.monotonic(), False
        return ok, error


class Probes:
    """The three probe paths; anything else is a 404, any method but GET/HEAD a 405."""

    PATHS = ("/healthz", "/readyz", "/metrics")

    def __init__(self, metrics: Metrics, readiness: Readiness | None = None) -> None:
        self._metrics = metrics
        self._readiness = readiness or Readiness(lambda: None)

    def answer(self, method: str, path: str) -> ProbeAnswer:
        path = path.split("?", 1)[0]
        if path not in self.PATHS:
            return _json(404, {"error": f"not found; the probe listener serves {', '.join(self.PATHS)}"})
        if method not in ("GET", "HEAD"):
            return _json(405, {"error": "method not allowed; use GET"})
        if path == "/healthz":
            return _json(200, {"status": "ok"})
        if path == "/readyz":
            return self._ready()
        return ProbeAnswer(200, CONTENT_TYPE_LATEST, generate_latest(self._metrics.registry))

    def _ready(self) -> ProbeAnswer:
        ok, error = self._readiness.check()
        if ok:
            return _json(200, {"status": "ready"})
        return _json(503, {"status": "not ready", "error": error})


def _json(status: int, body: dict[str, Any]) -> ProbeAnswer:
    return ProbeAnswer(status, JSON, json.dumps(body, separators=(",", ":")).encode() + b"\n")
