"""Errors typed by what the caller should do next, not by where they came from."""

from __future__ import annotations


class ReactorError(Exception):
    """Base of the reactor's own errors."""


class InvalidPayload(ReactorError):
    """The webhook body is not a valid Alertmanager v4 payload: answer 400, never retry."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class ConfigError(ReactorError):
    """The settings are invalid; the message names the offending key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class TemporaryError(ReactorError):
    """Worth retrying later (API server 5xx, 429, timeout): the webhook answers 503."""


class PermanentError(ReactorError):
    """Retrying will not help (403, 404, 422): counted and answered 200 with the reason."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class ConflictError(ReactorError):
    """The object changed since it was read (409): re-read, re-decide."""
