"""Runs the Flask app under gunicorn: one worker process with threads, and the probes beside it.

One process keeps `prometheus_client` simple (no multiprocess mode) and the in-memory dedup
cache and budget shared; more capacity comes from more replicas behind the Service, which the
annotation-based state and conditional writes make safe.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from reactor.act.posting import EventPoster
from reactor.app.arenas import limit_malloc_arenas
from reactor.app.probe_server import ProbeServer, bind_listener
from reactor.app.reads import WSGIApp, guard_input
from reactor.app.worker import worker_class
from reactor.cluster.informer import Informers
from reactor.config.settings import Settings
from reactor.observe.probes import Probes
from reactor.observe.verifier import Verifier


class _Gunicorn(BaseApplication):
    def __init__(self, app: Flask, options: dict[str, Any]) -> None:
        self._app = app
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> WSGIApp:
        return guard_input(self._app)


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


def run(app: Flask, settings: Settings, probes: Probes | None = None, verifier: Verifier | None = None,
        informers: Informers | None = None, events: EventPoster | None = None) -> None:
    """Serve until SIGTERM/SIGINT (gunicorn handles both gracefully); `probes` on their own listener.

    The probe socket is bound here, in gunicorn's arbiter, so a port in use fails the start and a
    restarted worker serves the same socket; the worker serves it from a thread of its own.
    The informers' threads start in the worker too (threads do not survive gunicorn's fork); the Events'
    sending thread starts in it with the first Event, and what is still queued is sent as the worker exits.
    """
    options = gunicorn_options(settings)
    sock = bind_listener(settings.server.probe_listen) if probes is not None else None

    def worker_init(worker: Any) -> None:
        # Threads of the worker (they do not survive gunicorn's fork), stopped with it.
        if sock is not None and probes is not None:
            ProbeServer(sock, probes).start()
        if informers is not None:
            informers.start()
        if verifier is not None:
            verifier.start()

    def worker_exit(server: Any, worker: Any) -> None:
        if verifier is not None:
            verifier.stop()
        if informers is not None:
            informers.stop()
        if events is not None:
            events.close()

    options["post_worker_init"] = worker_init
    options["worker_exit"] = worker_exit
    limit_malloc_arenas()  # before the fork: the worker's threads inherit the cap
    _Gunicorn(app, options).run()


