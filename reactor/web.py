"""The HTTP face: `POST /alerts` (Alertmanager webhook), `/metrics`, `/healthz`, `/readyz`.

Intake checks run in this order — token (401), size (413), content type (415), payload (400) —
so an unauthenticated caller learns nothing about what a valid body looks like. A bad payload
is a 4xx (Alertmanager does not retry it); a transient failure is a 503 (it does).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from werkzeug.exceptions import HTTPException

from .alerts import parse_notification
from .engine import Engine
from .errors import InvalidPayload, ReactorError, TemporaryError
from .metrics import Metrics
from .settings import Settings

log = logging.getLogger(__name__)
READY_CACHE_SECONDS = 5.0


class TokenFile:
    """The webhook's bearer token, re-read when the file changes so a rotated Secret needs no restart."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[float, int] | None = None
        self._token = b""
        self._lock = threading.Lock()
        self.current()  # fail at start, not at the first request, if it is unreadable

    def current(self) -> bytes:
        st = os.stat(self.path)
        stamp = (st.st_mtime, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                with open(self.path, "rb") as f:
                    token = f.read().strip()
                if not token:
                    raise ReactorError(f"token file {self.path} is empty")
                self._token, self._stamp = token, stamp
            return self._token

    def matches(self, header: str | None) -> bool:
        """Constant-time comparison of `Authorization: Bearer <token>`."""
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode("utf-8", "replace"), self.current())


class Readiness:
    """`/readyz`: the API server answered within the last few seconds (cached, so probes do not hammer it)."""

    def __init__(self, probe: Callable[[], Any]) -> None:
        self._probe = probe
        self._checked = 0.0
        self._ok = False
        self._error = ""
        self._lock = threading.Lock()

    def check(self) -> tuple[bool, str]:
        with self._lock:
            if time.monotonic() - self._checked < READY_CACHE_SECONDS:
                return self._ok, self._error
        try:
            self._probe()
            ok, error = True, ""
        except ReactorError as e:
            ok, error = False, str(e)
        with self._lock:
            self._ok, self._error, self._checked = ok, error, time.monotonic()
        return ok, error


def create_app(settings: Settings, *, engine: Engine, metrics: Metrics, token: TokenFile,
               readiness: Readiness | None = None, max_inflight: int | None = None) -> Flask:
    """The application factory; everything it uses is passed in, so tests build it with their own parts."""
    app = Flask("reactor")
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes
    # An answer holds one outcome per alert: sorting the keys of every one of them buys nothing.
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # Notifications may use all threads but two, so /healthz, /readyz and /metrics still answer in a storm
    # (a liveness probe that times out would restart a busy reactor); the rest wait ≤ 1 s, then get 503.
    inflight = threading.BoundedSemaphore(max_inflight or max(1, settings.server.threads - 2))
    # As many may wait as may work; one more gets its 503 at once. A waiting room without a bound only
    # moves the queue: under a storm every request waited its second, the server's threads were all
    # waiting, and new notifications queued in gunicorn, unanswered past Alertmanager's timeout.
    waiting = threading.BoundedSemaphore(max_inflight or max(1, settings.server.threads - 2))
    ready = readiness or Readiness(lambda: None)

    def answer(code: int, body: dict[str, Any]) -> Response:
        metrics.webhook_requests.labels(code=str(code)).inc()
        response = jsonify(body)
        response.status_code = code
        return response

    @app.post("/alerts")
    def alerts() -> Response:
        started = time.perf_counter()
        try:
            return _intake(answer)
        finally:
            metrics.webhook_duration.observe(time.perf_counter() - started)

    def _intake(answer: Callable[[int, dict[str, Any]], Response]) -> Response:
        try:
            authorized = token.matches(request.headers.get("Authorization"))
        except (OSError, ReactorError) as e:
            # Fail closed, and as a transient failure: the Secret is being replaced or not mounted yet.
            log.error("webhook token unreadable", extra={"error": str(e)})
            return answer(503, {"error": "the webhook token cannot be read; retry"})
        if not authorized:
            return answer(401, {"error": "missing or wrong bearer token"})
        length = request.content_length
        if length is not None and length > settings.server.max_body_bytes:
            return answer(413, {"error": f"body larger than {settings.server.max_body_bytes} bytes"})
        if request.mimetype != "application/json":
            return answer(415, {"error": f"expected Content-Type application/json, got {request.mimetype or 'none'!r}"})
        try:
            notification = parse_notification(_decode(request.get_data(cache=False)))
        except InvalidPayload as e:
            return answer(400, {"error": f"invalid Alertmanager payload: {e}", "field": e.field})
        if not _admit(inflight, waiting):
            return answer(503, {"error": "overloaded: too many notifications in flight; retry"})
        try:
            outcomes = engine.handle(notification)
        except TemporaryError as e:
            log.warning("notification failed, Alertmanager will retry", extra={"error": str(e)})
            return answer(503, {"error": f"temporary failure, retry: {e}"})
        finally:
            inflight.release()
        counts: dict[str, int] = {}
        for o in outcomes:
            counts[o.result] = counts.get(o.result, 0) + 1
        return answer(200, {"status": "ok", "summary": counts, "outcomes": [o.to_json() for o in outcomes]})

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    def healthz() -> Response:
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        ok, error = ready.check()
        response = jsonify({"status": "ready" if ok else "not ready", **({"error": error} if error else {})})
        response.status_code = 200 if ok else 503
        return response

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Response:
        code = e.code or 500
        if request.path == "/alerts":
            metrics.webhook_requests.labels(code=str(code)).inc()
        message = e.description if code != 413 else f"body larger than {settings.server.max_body_bytes} bytes"
        response = jsonify({"error": message})
        response.status_code = code
        return response

    return app


def _admit(inflight: threading.BoundedSemaphore, waiting: threading.BoundedSemaphore) -> bool:
    """A free slot; else a wait of at most 1 s if the waiting room has a seat; else no, at once."""
    if inflight.acquire(blocking=False):
        return True
    if not waiting.acquire(blocking=False):
        return False
    try:
        return inflight.acquire(timeout=1.0)
    finally:
        waiting.release()


def _decode(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidPayload("(body)", f"not valid UTF-8 at byte {e.start}") from e
    try:
        return json.loads(text)
    except RecursionError as e:
        raise InvalidPayload("(body)", "JSON nested too deeply") from e
    except ValueError as e:
        raise InvalidPayload("(body)", f"not valid JSON: {e}") from e
