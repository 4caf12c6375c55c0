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


class ConfigErrors(ConfigError):
    """Every problem found in one configuration, reported together (one per line)."""

    def __init__(self, problems: list[ConfigError]) -> None:
        super().__init__(problems[0].key, problems[0].problem)
        self.problems = tuple(problems)
        self.args = ("\n".join(str(p) for p in problems),)


class UsageError(ReactorError):
    """A command-line argument a person typed is wrong (a missing file, bad JSON): exit 2 with one line."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(f"{flag}: {problem}")
        self.flag = flag
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
