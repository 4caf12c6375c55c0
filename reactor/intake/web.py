"""The webhook's HTTP face: `POST /alerts` (Alertmanager webhook), and nothing else.

`/healthz`, `/readyz` and `/metrics` are served on the probe listener (reactor/observe/probes.py,
reactor/app/probe_server.py), never here: a probe that shares the webhook's threads can be
starved by slow clients or a storm, and the kubelet would restart a busy reactor.

Intake checks run in this order — token (401), size (413), content type (415), envelope (400) —
so an unauthenticated caller learns nothing about what a valid body looks like. A bad envelope
is a 4xx (Alertmanager does not retry it); a transient failure is a 503 (it does). A malformed
alert inside a valid envelope is that alert's outcome (`invalid-alert`, naming the field): the
engine decides the others as if it were not there, and the answer keeps the notification's order.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.wsgi import get_content_length

from reactor.act.metrics import ActMetrics
from reactor.config.settings import Settings
from reactor.core.errors import Failure, InvalidPayload, ReactorError, RetryLater, classify
from reactor.core.metrics import Metrics
from reactor.core.model import Notification, Result, SkipReason
from reactor.core.outcome import Outcome, answer_json
from reactor.intake.admission import Admission
from reactor.intake.alerts import Envelope, InvalidAlert, parse_envelope
from reactor.intake.bearer import TokenFile
from reactor.intake.metrics import WebhookMetrics
from reactor.intake.wire import read_envelope

log = logging.getLogger(__name__)
__all__ = ["Handler", "TokenFile", "create_app"]


class Handler(Protocol):
    """What the webhook hands a valid notification to (the engine). A protocol, so the intake stage never
    imports the stage that decides: the application assembly wires the two together."""

    def handle(self, notification: Notification) -> list[Outcome]: ...


def create_app(settings: Settings, *, engine: Handler, metrics: Metrics, token: TokenFile,
               max_inflight: int | None = None) -> Flask:
    """The application factory; everything it uses is passed in, so tests build it with their own parts."""
    webhook = WebhookMetrics.of(metrics)  # what the webhook counts (intake/metrics.py)
    app = Flask("reactor")
    # One byte over the limit, so that a chunked body (no Content-Length) of exactly the limit is read
    # whole and one that is longer is seen to be longer (see _body), not cut short.
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes + 1
    # An answer holds one outcome per alert: sorting the keys of every one of them buys nothing.
    app.json.sort_keys = False  # type: ignore[attr-defined]
    admission = Admission(max_inflight or max(1, settings.server.threads - 2))  # intake/admission.py

    def answer(code: int, body: dict[str, Any]) -> Response:
        metrics.child(webhook.webhook_requests, str(code)).inc()
        response = jsonify(body)
        response.status_code = code
        return response

    @app.post("/alerts")
    def alerts() -> Response:
        started = time.perf_counter()
        try:
            return _intake(answer)
        finally:
            webhook.webhook_duration.observe(time.perf_counter() - started)

    def _intake(answer: Callable[[int, dict[str, Any]], Response]) -> Response:
        environ = request.environ
        try:
            # Read from the WSGI environ as werkzeug's own readers do: the same string, without building the
            # request's header view for one lookup (the webhook's 1-alert request is a few hundred µs in all).
            credentials = token.check(environ.get("HTTP_AUTHORIZATION"))
        except (OSError, ReactorError) as e:
            # Fail closed, and as a transient failure: the Secret is being replaced or not mounted yet.
            log.error("webhook token unreadable", extra={"error": str(e)})
            return answer(503, {"error": "the webhook token cannot be read; retry"})
        if credentials != "ok":
            metrics.child(webhook.webhook_unauthorized, credentials).inc()
            return answer(401, {"error": "missing or wrong bearer token"})  # the same either way
        length = get_content_length(environ)  # None for a chunked body: _body bounds it
        if length is not None and length > settings.server.max_body_bytes:
            return answer(413, {"error": f"body larger than {settings.server.max_body_bytes} bytes"})
        if not _json_type(environ.get("CONTENT_TYPE")):
            return answer(415, {"error": f"expected Content-Type application/json, got {request.mimetype or 'none'!r}"})
        try:
            body = _body(settings.server.max_body_bytes)
            envelope = read_envelope(body) or parse_envelope(_json(body))
            del body
        except InvalidPayload as e:
            return answer(400, {"error": f"invalid Alertmanager payload: {e}", "field": e.field})
        if not admission.admit():
            return answer(503, {"error": "overloaded: too many notifications in flight; retry"})
        invalid = [_invalid_outcome(bad, metrics) for bad in envelope.invalid]
        try:
            outcomes = _merged(envelope, engine.handle(envelope.notification), invalid)
        except Exception as e:
            if classify(e) is not Failure.RETRY:
                raise  # a bug outside the engine's per-workload boundary: a 500, logged with its traceback
            log.warning("notification failed, Alertmanager will retry", extra={"error": str(e)})
            if isinstance(e, RetryLater):
                e = RetryLater(e.failures, _merged(envelope, e.outcomes, invalid))
            return answer(503, _retry_body(e))
        finally:
            admission.done()
        del envelope  # the alerts' labels and annotations: not needed for the answer, freed before it is built
        counts: dict[str, int] = {}
        for o in outcomes:
            counts[o.result] = counts.get(o.result, 0) + 1
        metrics.child(webhook.webhook_requests, "200").inc()
        return Response(answer_json(counts, outcomes), content_type="application/json")

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Response:
        code = e.code or 500
        if request.path == "/alerts":
            webhook.webhook_requests.labels(code=str(code)).inc()
        too_large = f"body larger than {settings.server.max_body_bytes} bytes"
        response = jsonify({"error": too_large if code == 413 else e.description})
        response.status_code = code
        return response

    return app


def _invalid_outcome(bad: InvalidAlert, metrics: Metrics) -> Outcome:
    """A malformed alert's own outcome, naming the field; counted and logged like any skip."""
    metrics.child(ActMetrics.of(metrics).alerts_skipped, SkipReason.INVALID_ALERT.value).inc()
    log.info("decision", extra={"alert": bad.name, "fingerprint": bad.fingerprint, "namespace": bad.namespace,
                                "pod": bad.pod, "workload": None, "result": Result.SKIPPED,
                                "reason": SkipReason.INVALID_ALERT.value, "detail": str(bad.error),
                                "field": bad.error.field})
    return Outcome(bad.name, bad.fingerprint, bad.starts_at, bad.status, bad.namespace, bad.pod, None, Result.SKIPPED,
                   reason=SkipReason.INVALID_ALERT.value, detail=f"invalid alert: {bad.error}")


def _merged(envelope: Envelope, decided: Sequence[Outcome], invalid: Sequence[Outcome]) -> list[Outcome]:
    """The engine's outcomes (of the valid alerts) and the invalid alerts' own, in the notification's order."""
    if not invalid:
        return list(decided)
    merged: list[Outcome | None] = [None] * envelope.total
    for position, outcome in zip(envelope.positions, decided, strict=True):
        merged[position] = outcome
    for bad, outcome in zip(envelope.invalid, invalid, strict=True):
        merged[bad.index] = outcome
    return [o for o in merged if o is not None]


def _retry_body(error: Exception) -> dict[str, Any]:
    """The 503's body: what failed, and — when the engine handled the rest (`RetryLater`) — every alert's outcome, the
    ones a retry can fix `failed`/`api-error` saying so. Alertmanager reads only the status code (notify/util.go,
    `Retrier.Check`); the body is for the person reading the reactor's log or the webhook's answer."""
    body: dict[str, Any] = {"error": f"temporary failure, retry: {error}", "retry": True}
    if isinstance(error, RetryLater):
        counts: dict[str, int] = {}
        for o in error.outcomes:
            counts[o.result] = counts.get(o.result, 0) + 1
        body.update(summary=counts, outcomes=[o.to_json() for o in error.outcomes])
    return body


def _json_type(header: str | None) -> bool:
    """Whether the Content-Type is JSON: Alertmanager's exact spelling at once, anything else as werkzeug reads
    it (`request.mimetype`: parameters dropped, lower case), so `Application/JSON; charset=utf-8` is JSON too."""
    return header == "application/json" or (bool(header) and request.mimetype == "application/json")


def _body(limit: int) -> bytes:
    """The request body. A chunked body (no Content-Length) longer than `limit` is a 413, not a body cut short: the
    stream stops one byte past the limit (MAX_CONTENT_LENGTH), so reading it whole shows whether there is more."""
    raw = request.get_data(cache=False)
    if len(raw) > limit:
        raise RequestEntityTooLarge()
    return raw


def _json(raw: bytes) -> Any:
    """The careful reading of a body the common case did not fit (intake/wire.py): UTF-8, then JSON, each failure
    named. The text is let go as soon as it is decoded (a storm's body is megabytes: the bytes, the text and the
    parsed JSON need not all be held at once)."""
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
