"""The HTTP server under the demo's stand-ins for Alertmanager's and Prometheus's APIs (alertmanager_api.py,
prometheus_api.py): a loopback port, a thread of its own, every GET handed to the stand-in's `answer`.

Only the serving lives here; what a stand-in answers, and in which upstream shape, stays in its own module.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackServer:
    """Serves GETs on `host`, port chosen by the system, from `start` (or `with`) to `stop`. `requests`: each
    request's path and query, in order, the latest only (`reactor demo --serve` may run for days); `answered`: how
    many requests each path has had, all of them (the bench counts on it past the latest thousand).

    `keep_alive`: HTTP/1.1 connections stay open between requests, as Go's servers keep them, and `stop` closes them
    as a stopped server's are; otherwise each answer closes its connection (HTTP/1.0)."""

    def __init__(self, host: str, *, thread_name: str, keep_alive: bool = False) -> None:
        self._host = host
        self.requests: collections.deque[str] = collections.deque(maxlen=1000)
        self.answered: collections.Counter[str] = collections.Counter()
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                if keep_alive:
                    with server._open_lock:
                        server._open.add(self.connection)

            def finish(self) -> None:
                with server._open_lock:
                    server._open.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    server.requests.append(self.path)
                    with server._open_lock:  # handler threads at once: a read-modify-write
                        server.answered[self.path.partition("?")[0]] += 1
                    server.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=thread_name, daemon=True)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        """Answer one GET (`handler.path`) through `send`."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._open_lock:
            open_, self._open = list(self._open), set()
        for conn in open_:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._server.server_address[1]}"

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
