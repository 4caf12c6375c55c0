"""The local HTTP stub the source tests talk to, and what it answers with: a whole answer, or one trickled byte by
byte."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[BaseHTTPRequestHandler], None]


def send(h: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json") -> None:
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def trickle(length: int, sent: int) -> Handler:
    """An answer that announces `length` bytes and sends `sent` of them, one every 50 ms: each byte comes well
    within a client's timeout, the whole answer does not."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(length))
        h.end_headers()
        for _ in range(sent):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.05)

    return answer


class StubServer:
    """A loopback HTTP server whose answer each test sets (`handler`); records each request's path and headers, and
    the connections they came on. `keep_alive`: HTTP/1.1, connections kept open; `context`: TLS."""

    def __init__(self, handler: Handler, *, keep_alive: bool = False, context: Any = None) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.connections: set[tuple[str, int]] = set()
        stub = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                stub.requests.append((self.path, dict(self.headers)))
                stub.connections.add(self.client_address)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    stub.handler(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.server.daemon_threads = True
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
