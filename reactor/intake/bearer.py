"""The webhook's bearer token, read from a file (a mounted Secret) and compared in constant time.

The file is re-read by content: whenever its inode, size, mtime or ctime changes, and in any case
every `REREAD_SECONDS`, so a token rewritten in place with the same size and an old mtime (or on a
file system with coarse timestamps) still rotates without a restart. An empty or unreadable file
lets nobody in. This module must not log the token or any part of it.

The file's stat is taken at most once every `CHECK_SECONDS`, not on every request: a system call lets the
interpreter hand its lock to another thread, and in a busy worker that cost the request two context switches
(docs/performance.md). A rotated token therefore takes effect within a second of the kubelet writing it, which
itself takes up to about a minute after the Secret changes. A file found unreadable or empty is checked again at
every request, so the webhook opens again as soon as it is fixed.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Callable

from reactor.core.errors import ReactorError

REREAD_SECONDS = 2.0
CHECK_SECONDS = 1.0


class TokenFile:
    """The current token of `path`; `matches` checks an `Authorization` header against it."""

    def __init__(self, path: str, *, reread_seconds: float = REREAD_SECONDS, check_seconds: float = CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._reread_seconds, self._check_seconds = reread_seconds, check_seconds
        self._clock = clock
        # (token, the file's stamp when it was read, when it was read, when the stamp was last checked), replaced
        # whole; None as the stamp: read the file at the next use
        self._held: tuple[bytes, tuple[int, ...] | None, float, float] = (b"", None, float("-inf"), float("-inf"))
        self._lock = threading.Lock()
        self.current()  # fail at start, not at the first request, if it is unreadable

    def current(self) -> bytes:
        """The token; raises OSError (unreadable) or ReactorError (empty): callers fail closed.

        Checked within `CHECK_SECONDS`: the token held, without a lock (every request asks, and a lock that every
        request thread takes blocks them all whenever its holder is switched out). Otherwise the check, and a
        re-read where it calls for one, under the lock."""
        now = self._clock()
        token, stamp, read_at, checked_at = self._held
        if stamp is not None and now - checked_at < self._check_seconds:
            return token
        with self._lock:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            token, known, read_at, _ = self._held
            if stamp != known or now - read_at >= self._reread_seconds:
                token, read_at = self._read(), now
            self._held = (token, stamp, read_at, now)
            return token

    def _read(self) -> bytes:
        with open(self.path, "rb") as f:
            token = f.read().strip()
        if not token:
            self._held = (b"", None, float("-inf"), float("-inf"))  # read again next time, whatever its stamp
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
