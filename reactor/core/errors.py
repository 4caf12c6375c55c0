"""Errors typed by what the caller should do next, not by where they came from."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reactor.core.outcome import Outcome


class ReactorError(Exception):
    """Base of the reactor's own errors."""


class InputError(ReactorError):
    """An input refused for a reason a person can fix: `name` (a payload's field, a settings key, a command-line
    flag) and the `problem`, the message being `name: problem`."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


class InvalidPayload(InputError):
    """The webhook body is not a valid Alertmanager v4 payload: answer 400, never retry."""

    @property
    def field(self) -> str:
        """The payload's field, as the 400 answer names it."""
        return self.name


class ConfigError(InputError):
    """The settings are invalid; the message names the offending key."""

    @property
    def key(self) -> str:
        return self.name


class ConfigErrors(ConfigError):
    """Every problem found in one configuration, reported together (one per line)."""

    def __init__(self, problems: list[ConfigError]) -> None:
        super().__init__(problems[0].key, problems[0].problem)
        self.problems = tuple(problems)
        self.args = ("\n".join(str(p) for p in problems),)


class UsageError(InputError):
    """A command-line argument a person typed is wrong (a missing file, bad JSON): exit 2 with one line; `name` is
    the flag."""


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


class AlertSourceUnavailable(ReactorError):
    """The source of firing alerts (Alertmanager's API v2, for rebalancing) did not answer usefully: unreachable,
    too slow, refused the credentials, or sent what is not its API. `reason` is one line for the operator; the
    caller acts as if no donor were idle (nothing is written on an unknown)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PrometheusUnavailable(TemporaryError):
    """Prometheus (the measurement the reactor confirms alerts against) did not answer usefully: unreachable, too
    slow, refused the credentials, or sent what is not its API. A temporary error: nothing is written on an
    unknown, and the webhook answers 503 so that Alertmanager delivers the notification again. `reason` is one
    line for the operator, naming the URL without its credentials."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Failure(enum.Enum):
    """What a failure met while handling a notification calls for; `classify` is the one place that decides it."""

    RETRY = "retry"  # the API server or the network failed this time: a later delivery can succeed (503)
    REFUSED = "refused"  # the API server answered for good (403, 404, 422): this workload's outcome, answered 200
    INTERNAL = "internal"  # anything else (the workload's own data, a bug): a retry meets it again; that workload fails


def classify(error: BaseException) -> Failure:
    """The class of `error`, whatever the verb (get, list, patch, create) that met it and wherever it surfaced.

    Retry: `TemporaryError` (5xx, 429, timeouts and dropped connections after the gateway's bounded retries, conflicts
    beyond the act step's budget), a `ConflictError` that escaped the act step (a 409 on a read, or on any request but
    the conditional write that re-reads and re-decides), and a connection or timeout error that reached here unwrapped.
    Alertmanager retries a 5xx and nothing else (notify/util.go, `Retrier.Check`, which the webhook notifier's `Notify`
    asks), so only these make the notification a 503. Refused: the other answers of the API server (`PermanentError`).
    Internal: every other exception, which says something about the data being decided or the code deciding it.
    """
    if isinstance(error, (TemporaryError, ConflictError, ConnectionError, TimeoutError)):
        return Failure.RETRY
    if isinstance(error, PermanentError):
        return Failure.REFUSED
    return Failure.INTERNAL


class RetryLater(TemporaryError):
    """Some workloads of a notification met a failure a retry can fix (`Failure.RETRY`); the others were handled.

    The webhook answers 503 — Alertmanager delivers the notification again, and the workloads handled this time then
    refuse early (`already-applied`, cooldown) — with every alert's outcome, the failed ones `failed`/`api-error`.
    """

    SHOWN = 5  # failures named in the message (and the log line): a failed LIST can fail thousands of pods at once

    def __init__(self, failures: Sequence[str], outcomes: Sequence[Outcome]) -> None:
        more = len(failures) - self.SHOWN
        tail = f"; and {more} more (see the outcomes)" if more > 0 else ""
        super().__init__("; ".join(failures[:self.SHOWN]) + tail)
        self.failures = tuple(failures)
        self.outcomes = tuple(outcomes)
