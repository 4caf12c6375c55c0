"""Runs the Flask app under gunicorn: one worker process with threads.

One process keeps `prometheus_client` simple (no multiprocess mode) and the in-memory dedup
cache and budget shared; more capacity comes from more replicas behind the Service, which the
annotation-based state and conditional writes make safe.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from .settings import Settings


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
        "worker_class": "gthread",
        # server.threads bounds the notifications at work (see web.create_app) and as many waiting;
        # the other threads answer at once — probes, /metrics, 4xx, and the 503 of a full waiting
        # room — so overload is a quick 503 Alertmanager retries, not a queue inside gunicorn.
        "threads": 3 * server.threads,
        "timeout": int(server.timeout.total_seconds()) + 5,
        "graceful_timeout": 10,
        "keepalive": 5,
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
