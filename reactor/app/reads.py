"""Bounded request reads for the webhook's gunicorn worker: a deadline for the whole request, and body
errors answered as HTTP errors.

gunicorn reads a request's head and body with plain blocking `recv` calls. A per-read timeout drops a
client that stops sending, but not one that trickles a byte every few seconds: each byte restarts the
timer, and a few dozen such clients hold every thread. `DeadlineReader` sits between gunicorn's parser
and the socket: each read waits at most the idle timeout and never past the request's deadline, which
starts with the request's first read (head and body together). `guard_input` turns what goes wrong
while the application reads the body into werkzeug's HTTP errors: a deadline is a 408, a malformed
chunked encoding or a body cut short by EOF a 400 — never a 500. This module must not decide anything about the payload.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gunicorn.http.errors import NoMoreData, ParseException
from werkzeug.exceptions import BadRequest, RequestTimeout

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class RequestDeadline(NoMoreData):
    """The request was not read within its deadline (gunicorn closes a connection on NoMoreData quietly)."""

    def __str__(self) -> str:
        return "the request was not received within its deadline"


class DeadlineReader:
    """What gunicorn's parser reads from: `sock`, each read bounded by `idle` seconds and the request's deadline."""

    def __init__(self, sock: socket.socket, *, idle: float, total: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sock = sock
        self._idle = idle
        self._total = total
        self._clock = clock
        self._deadline: float | None = None

    def restart(self) -> None:
        """A new request begins on this connection: its deadline starts with its first read."""
        self._deadline = None

    def expire(self) -> None:
        """The request's deadline has passed already (its bytes were read elsewhere): the next read raises."""
        self._deadline = self._clock()

    def recv(self, size: int) -> bytes:
        now = self._clock()
        if self._deadline is None:
            self._deadline = now + self._total
        remaining = self._deadline - now
        if remaining <= 0:
            raise RequestDeadline()
        self._sock.settimeout(min(self._idle, remaining))
        try:
            return self._sock.recv(size)
        except TimeoutError as e:
            raise RequestDeadline() from e


class _GuardedInput:
    """`wsgi.input` whose read errors are HTTP errors the application answers (and the connection then closes)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, size: int | None = None) -> bytes:
        return _guarded(self._stream.read, size)

    def readline(self, size: int | None = None) -> bytes:
        return _guarded(self._stream.readline, size)

    def readlines(self, hint: int | None = None) -> list[bytes]:
        return _guarded(self._stream.readlines, hint)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")


def _guarded(read: Callable[[Any], Any], arg: Any) -> Any:
    try:
        return read(arg)
    except RequestDeadline as e:
        raise RequestTimeout(f"{e}; send the whole request at once") from e
    except NoMoreData as e:  # the client closed its side in the middle of the body (a chunked one: no length)
        raise BadRequest("the request body ended before its end (the connection was closed)") from e
    except ParseException as e:
        raise BadRequest(f"malformed request body: {e}") from e


def guard_input(app: WSGIApp) -> WSGIApp:
    """`app` with `_GuardedInput` in place of the server's `wsgi.input`."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"] = _GuardedInput(environ["wsgi.input"])
        return app(environ, start_response)

    return guarded
