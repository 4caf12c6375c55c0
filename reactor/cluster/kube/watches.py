"""Open watch streams: read line by line as events, and ended from any thread when the reactor stops.

A watch is one long HTTP response. The informer's thread blocks reading it; `stop` comes from another thread, so
the gateway keeps every open response here and shuts its socket to end the read at once. A stream may end on its
own between the two (its socket closed, its connection back in the pool): ending it then is the goal reached.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import urllib3

from reactor.core.errors import TemporaryError


class WatchStreams:
    """The watch responses open now."""

    def __init__(self) -> None:
        self._open: set[Any] = set()
        self._lock = threading.Lock()

    def events(self, response: Any, resource: str) -> Iterator[dict[str, Any]]:
        """Each JSON event of `response` until it ends; a broken stream is a `TemporaryError` (list/watch again)."""
        with self._lock:
            self._open.add(response)
        try:
            for line in response:
                if line.strip():
                    event = json.loads(line)
                    if not isinstance(event, dict):
                        raise ValueError("a watch event that is not a JSON object")
                    yield event
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            raise TemporaryError(f"watch {resource}: {type(e).__name__}: {e}") from e
        finally:
            with self._lock:
                self._open.discard(response)
            response.release_conn()

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def end_all(self) -> None:
        """End every open stream now (a read blocked in another thread returns)."""
        with self._lock:
            open_now = list(self._open)
        for response in open_now:
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3 interrupts a read blocked in another thread
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                (shutdown or response.close)()

    def track(self, response: Any) -> None:
        """Count `response` as open (for a test that plays a stream closing under `end_all`)."""
        with self._lock:
            self._open.add(response)
