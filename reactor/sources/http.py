"""The discipline every outbound client of the reactor keeps (Alertmanager's API, Prometheus's API): one place.

A configured URL is split once and never printed with its credentials; a bearer token is re-read from its file when
the file changes (a rotated Secret; the file's stat is checked at most once a second, intake/bearer.py); https is
verified against a CA file, rebuilt when it changes; an answer is read under a byte cap; a deadline ends a connection
under its reader (a server that trickles bytes cannot hold a caller past it). Each failure is a `Failed` whose
`result` is the caller's metrics label.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from reactor.config.fields import without_credentials
from reactor.core.errors import ReactorError
from reactor.intake.bearer import TokenFile, sendable

CHUNK = 64 * 1024


class Failed(Exception):
    """One request's failure: `result` is its metrics label ("timeout", "unreachable", "refused", "invalid"), `why`
    the reason's tail."""

    def __init__(self, result: str, why: str) -> None:
        super().__init__(why)
        self.result, self.why = result, why


@dataclass(frozen=True, slots=True)
class Target:
    """The configured URL, split once: where to connect, the path prefix, the URL as it may be printed."""

    https: bool
    host: str
    port: int
    prefix: str  # a route prefix (--web.route-prefix, or a proxy's path), without the trailing slash
    shown: str  # scheme://host[:port]/prefix: never the userinfo
    basic: str | None = field(repr=False)  # `Basic ...` from user:password@ in the URL: never printed

    @classmethod
    def of(cls, url: str, key: str) -> Target:
        """`key` names the setting in the error a URL that is not http(s) with a host (and a valid port) gets."""
        parts = urllib.parse.urlsplit(url)
        try:
            given_port = parts.port  # raises on a port that is not a number from 0 to 65535
        except ValueError:
            given_port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or given_port == -1:
            raise ReactorError(f"{key}: expected an http(s) URL with a host (and a valid port), "
                               f"got {without_credentials(url)!r}")
        https = parts.scheme == "https"
        host = parts.hostname
        netloc = (f"[{host}]" if ":" in host else host) + (f":{given_port}" if given_port else "")
        prefix = parts.path.rstrip("/")
        basic = None
        if parts.username is not None:
            pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            basic = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return cls(https, host, given_port or (443 if https else 80), prefix, f"{parts.scheme}://{netloc}{prefix}",
                   basic)


class Credentials:
    """The `Authorization` header: `Bearer <token>` from the token file, re-read when it changes
    (intake/bearer.py `TokenFile`), else the URL's own `Basic` userinfo, else none. Thread-safe."""

    def __init__(self, token_file: str | None, basic: str | None) -> None:
        self._path, self._basic = token_file, basic
        self._token: TokenFile | None = None
        self._lock = threading.Lock()

    def header(self) -> str | None:
        path = self._path
        if path is None:
            return self._basic
        try:
            with self._lock:
                if self._token is None:
                    self._token = TokenFile(path)
                token = self._token.current()
        except (OSError, ReactorError) as e:
            raise Failed("unreachable", f"token file {path}: {one_line(getattr(e, 'strerror', None) or e)}") \
                from None
        if not sendable(token):
            raise Failed("unreachable", f"token file {path}: holds characters an HTTP header cannot carry")
        return "Bearer " + token.decode("ascii")


class Tls:
    """The TLS context: verified against `ca_file` (else the system's roots), rebuilt when the file changes (a
    rotated CA). Thread-safe; `context()` says whether it was rebuilt, so a caller drops connections made before."""

    def __init__(self, ca_file: str | None) -> None:
        self._path = ca_file
        self._built: tuple[tuple[int, ...] | None, ssl.SSLContext] | None = None
        self._lock = threading.Lock()

    def context(self) -> tuple[ssl.SSLContext, bool]:
        path = self._path
        try:
            stamp = None
            if path is not None:
                st = os.stat(path)
                stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            with self._lock:
                rebuilt = self._built is None or self._built[0] != stamp
                if self._built is None or rebuilt:
                    self._built = (stamp, ssl.create_default_context(cafile=path))
                return self._built[1], rebuilt
        except (OSError, ssl.SSLError) as e:
            raise Failed("unreachable", f"CA file {path}: {one_line(getattr(e, 'strerror', None) or e)}") from None


def read_body(response: http.client.HTTPResponse, max_body: int) -> bytes:
    """The whole answer, refused past `max_body` bytes (declared or read), and short of a declared length."""
    declared = response.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise Failed("invalid", f"an answer of {int(declared)} bytes, over the {max_body}-byte limit")
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(CHUNK)
        if not chunk:
            if declared is not None and declared.isdigit() and size != int(declared):
                raise Failed("unreachable", f"the answer ended after {size} of {declared} bytes")
            return b"".join(chunks)
        size += len(chunk)
        if size > max_body:
            raise Failed("invalid", f"an answer over the {max_body}-byte limit")
        chunks.append(chunk)


class Watchdog:
    """The deadline of one exchange, kept under its reader: once armed, it ends the connection at the deadline (a
    server that trickles bytes cannot hold the caller past it), and then tells a stream it cut (a part, not the
    answer) and a connection it broke (the timeout's doing, not the server's) from the server's own failures."""

    def __init__(self, deadline: float, clock: Callable[[], float], timeout: float) -> None:
        self._deadline, self._clock, self._timeout = deadline, clock, timeout
        self._expired = threading.Event()
        self._timer: threading.Timer | None = None

    def arm(self, sock: socket.socket | None) -> None:
        """From the connected socket on; held here, as http.client drops conn.sock once an HTTP/1.0 answer's head
        is read (will_close)."""
        self._timer = threading.Timer(max(0.0, self._deadline - self._clock()), abort, (sock, self._expired))
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    @property
    def expired(self) -> bool:
        return self._expired.is_set()

    def cut_short(self) -> Failed:
        return Failed("timeout", f"no whole answer within the {self._timeout:g}s timeout")

    def failure(self, error: OSError | http.client.HTTPException | ValueError) -> Failed:
        """A socket, TLS or HTTP error as the `Failed` the caller counts."""
        if isinstance(error, TimeoutError):
            return Failed("timeout", f"no answer within the {self._timeout:g}s timeout")
        if isinstance(error, ssl.SSLError):
            return Failed("unreachable", f"TLS: {one_line(error)}")
        if self.expired or self._clock() >= self._deadline:
            return self.cut_short()
        return Failed("unreachable", one_line(getattr(error, "reason", None) or error or type(error).__name__))


def abort(sock: socket.socket | None, expired: threading.Event) -> None:
    """The deadline passed: end the connection under the reader (its blocked read fails at once). The plain
    socket's shutdown, also under TLS: the SSL object stays for the reader, which then meets end of stream."""
    expired.set()
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def one_line(text: object, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "…"
