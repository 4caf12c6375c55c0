"""Runs the Flask app under gunicorn: one worker process with threads.

One process keeps `prometheus_client` simple (no multiprocess mode) and the in-memory dedup
cache and budget shared; more capacity comes from more replicas behind the Service, which the
annotation-based state and conditional writes make safe.
"""

from __future__ import annotations

import errno
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication
from gunicorn.workers import gthread

from ..settings import Settings


class _Connection(gthread.TConn):  # type: ignore[misc]
    """A connection whose reads time out: a client that stops sending mid-request is dropped.

    gthread reads a request in blocking mode with no timeout once its first bytes arrived, so a
    few dozen clients sending half a header would hold every thread (probes included) without
    ever showing a token. `init` runs in the worker thread before each request is parsed.
    """

    def init(self) -> None:
        super().init()
        self.sock.settimeout(self.cfg.keepalive)


class ReadTimeoutWorker(gthread.ThreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker, with `_Connection` for every accepted client."""

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        client_sock.setblocking(True)
        self.enqueue_req(_Connection(self.cfg, client_sock, client_addr, listener.getsockname()))


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, app: Flask, options: dict[str, Any]) -> None:
        self._app = app
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._app


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    server = settings.server
    options: dict[str, Any] = {
        "bind": [server.listen],
        "workers": 1,
        "worker_class": "reactor.app.runner.ReadTimeoutWorker",
        # server.threads bounds the notifications at work (see web.create_app) and as many waiting;
        # the other threads answer at once — probes, /metrics, 4xx, and the 503 of a full waiting
        # room — so overload is a quick 503 Alertmanager retries, not a queue inside gunicorn.
        "threads": 3 * server.threads,
        "timeout": int(server.timeout.total_seconds()) + 5,
        "graceful_timeout": 10,
        "keepalive": 5,  # also the longest a client may stall in the middle of a request
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "limit_request_line": 8190,
        "limit_request_fields": 100,
    }
    if server.tls_cert and server.tls_key:
        options.update(certfile=server.tls_cert, keyfile=server.tls_key)
    return options


def run(app: Flask, settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT (gunicorn handles both gracefully)."""
    _Gunicorn(app, gunicorn_options(settings)).run()
