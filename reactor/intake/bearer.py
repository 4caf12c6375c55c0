"""The webhook's bearer token, read from a file (a mounted Secret) and compared in constant time.

The file is re-read by content: whenever its inode, size, mtime or ctime changes, and in any case
every `REREAD_SECONDS`, so a token rewritten in place with the same size and an old mtime (or on a
file system with coarse timestamps) still rotates without a restart. An empty or unreadable file
lets nobody in. This module must not log the token or any part of it.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Callable

from reactor.core.errors import ReactorError

REREAD_SECONDS = 2.0


class TokenFile:
    """The current token of `path`; `matches` checks an `Authorization` header against it."""

    def __init__(self, path: str, *, reread_seconds: float = REREAD_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._reread_seconds = reread_seconds
        self._clock = clock
        self._stamp: tuple[int, ...] | None = None
        self._read_at = float("-inf")
        self._token = b""
        self._lock = threading.Lock()
        self.current()  # fail at start, not at the first request, if it is unreadable

    def current(self) -> bytes:
        """The token; raises OSError (unreadable) or ReactorError (empty): callers fail closed."""
        st = os.stat(self.path)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            now = self._clock()
            if stamp != self._stamp or now - self._read_at >= self._reread_seconds:
                self._token, self._stamp, self._read_at = self._read(), stamp, now
            return self._token

    def _read(self) -> bytes:
        with open(self.path, "rb") as f:
            token = f.read().strip()
        if not token:
            self._stamp = None  # read again next time, whatever the file's stamp
            raise ReactorError(f"token file {self.path} is empty")
        return token

    def matches(self, header: str | None) -> bool:
        """Constant-time comparison of `Authorization: Bearer <token>`."""
        return self.check(header) == "ok"

    def check(self, header: str | None) -> str:
        """`ok`, `missing` (no bearer token at all: a probe, or a sender without credentials) or `wrong`; the token
        compared in constant time."""
        given = header[7:].strip() if header and header.startswith("Bearer ") else ""
        if not given:
            return "missing"
        return "ok" if hmac.compare_digest(given.encode("utf-8", "replace"), self.current()) else "wrong"


def sendable(token: bytes) -> bool:
    """Whether a token can travel in an HTTP header as it is: printable ASCII without spaces. Anything else would
    be refused by the HTTP client with the whole token in its error."""
    return bool(token) and all(0x20 < b < 0x7F for b in token)
