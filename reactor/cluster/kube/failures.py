"""What an `ApiException` means for the caller: the reactor's own errors, and how long to wait before a retry.

A 409 is a conflict to re-read and re-decide, 404 and 410 are answers (gone; list again), 429 and 5xx are worth
a bounded retry that honours `Retry-After`, everything else is permanent for this request.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from reactor.core.backoff import doubling
from reactor.core.errors import ConflictError, PermanentError, TemporaryError

MAX_RETRY_AFTER = 5.0


class NotFound(PermanentError):
    """The object does not exist (404)."""


class Expired(PermanentError):
    """The resourceVersion a list or watch started from is too old (410 Gone): list again."""


def translate(e: ApiException, verb: str, resource: str) -> Exception:
    body = status_body(e)
    message = body.get("message") or e.reason or "no message"
    reason = body.get("reason", "")
    text = f"{verb} {resource}: {e.status} {reason}: {message}".replace(" : ", " ")
    if e.status == 409:
        return ConflictError(text)
    if e.status == 404:
        return NotFound(text, status=404, reason=reason)
    if e.status == 410:
        return Expired(text, status=410, reason=reason)
    if e.status == 429 or (e.status or 0) >= 500:
        return TemporaryError(text)
    return PermanentError(text, status=e.status, reason=reason)


def status_body(e: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(e.body or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def retry_after(e: ApiException, attempt: int) -> float:
    header = (e.headers or {}).get("Retry-After") if e.headers is not None else None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(header))) if header else backoff(attempt)
    except ValueError:
        return backoff(attempt)


def backoff(attempt: int) -> float:
    return doubling(attempt, first=0.1, cap=MAX_RETRY_AFTER)
