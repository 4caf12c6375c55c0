"""Runs the Flask app under gunicorn: one worker process with threads, and the probes beside it.

One process keeps `prometheus_client` simple (no multiprocess mode) and the in-memory dedup
cache and budget shared; more capacity comes from more replicas behind the Service, which the
annotation-based state and conditional writes make safe.

gunicorn's master (the arbiter) only binds the sockets and watches the worker: the service — Flask, the engine,
the Kubernetes client, the watch cache — is assembled in the worker (`_Gunicorn.load`), so the pod holds those
modules once instead of twice (the master measured 94 MB when it assembled them before the fork). What the worker
would refuse is checked in the master first (reactor/app/preflight.py), so a bad configuration is still one line.
"""

from __future__ import annotations

import gc
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from reactor.app.arenas import limit_malloc_arenas
from reactor.app.background import Background, start_all, stop_all
from reactor.app.listeners import bind_listener
from reactor.app.worker import worker_class
from reactor.config.settings import Settings

if TYPE_CHECKING:
    from reactor.app.assembly import Service
    from reactor.app.reads import WSGIApp

log = logging.getLogger(__name__)


class _Gunicorn(BaseApplication):
    """Loads the app in the worker: `build` assembles the service there (and the app it serves is its)."""

    def __init__(self, build: Callable[[], Service | _Bare], options: dict[str, Any]) -> None:
        self._build = build
        self._options = options
        self.service: Service | _Bare | None = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> WSGIApp:
        from reactor.app.reads import guard_input

        self.service = self._build()
        # What the worker just built lives as long as it does: out of the collector's reach, a full collection walks
        # only what requests leave behind. Measured in one process holding the service and the embedded cluster
        # (262,000 objects tracked): a full collection, when one fell due, took 154 ms; frozen, a few ms
        # (`python -m bench.request_profile [--no-freeze]` counts them).
        gc.freeze()
        return guard_input(self.service.app)


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    server = settings.server
    options: dict[str, Any] = {
        "bind": [server.listen],
        "workers": 1,
        "worker_class": worker_class(server.read_timeout.total_seconds(), server.max_body_bytes),
        # server.threads bounds the notifications at work (see web.create_app) and as many waiting;
        # the other threads answer at once — probes, /metrics, 4xx, and the 503 of a full waiting
        # room — so overload is a quick 503 Alertmanager retries, not a queue inside gunicorn.
        "threads": 3 * server.threads,
        "timeout": int(server.timeout.total_seconds()) + 5,
        "graceful_timeout": 10,
        "keepalive": 5,  # also the longest a client may stall in the middle of a request (server.readTimeout: in all)
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "limit_request_line": 8190,
        "limit_request_fields": 100,
    }
    if server.tls_cert and server.tls_key:
        options.update(certfile=server.tls_cert, keyfile=server.tls_key)
    return options


@dataclass(frozen=True)
class _Bare:
    """A WSGI app served alone (the bench's echo): no probes, no informers, no verifier."""

    app: Any


def serve_app(app: Any, settings: Settings) -> None:
    """A bare WSGI app under the reactor's gunicorn settings (worker class, threads, read deadlines): the bench's
    Flask echo, so the comparison with the reactor is like for like."""
    limit_malloc_arenas()
    _Gunicorn(lambda: _Bare(app), gunicorn_options(settings)).run()


def run(settings: Settings, build: Callable[[socket.socket], Service]) -> None:
    """Serve until SIGTERM/SIGINT (gunicorn handles both gracefully); the probes on their own listener.

    `build` assembles the service in the worker (reactor/app/assembly.py `assemble`), given the probe listener.
    The probe socket is bound here, in gunicorn's arbiter, so a port in use fails the start and a restarted worker
    serves the same socket. The worker starts `Service.background` (the probe server, the Events' sender, the
    informers, the verifier, the rebalancer when it acts) in order, and stops it in reverse as it exits: threads do
    not survive gunicorn's fork, so none of them may start before it.
    """
    options = gunicorn_options(settings)
    sock = bind_listener(settings.server.probe_listen)
    application: _Gunicorn | None = None

    def parts() -> tuple[Background, ...]:
        service = application.service if application is not None else None
        return () if service is None or isinstance(service, _Bare) else service.background

    options["post_worker_init"] = lambda worker: start_all(parts())
    options["worker_exit"] = lambda server, worker: stop_all(parts())  # what is still queued is sent as it exits
    limit_malloc_arenas()  # before the fork: the worker's threads inherit the cap
    application = _Gunicorn(lambda: build(sock), options)
    gc.freeze()  # the master's objects out of the collector's reach: the worker's collections leave their pages shared
    application.run()
