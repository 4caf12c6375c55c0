"""A scrape target for the end-to-end tests: a collector's own `CollectorRegistry` (nothing global) served on
127.0.0.1 on an ephemeral port, for Prometheus to scrape. The fake exporters subclass it and say what they export."""

from __future__ import annotations

from typing import Self

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector


class ScrapeTarget(Collector):
    """`start()` / `stop()`, or a with-block; `address` is what Prometheus scrapes. A subclass sets up its state
    before calling `__init__` here (registering it reads nothing yet: the registry does not auto-describe)."""

    def __init__(self) -> None:
        self._server: object | None = None
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self.port = 0

    def start(self) -> Self:
        server, _thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
            server.server_close()  # type: ignore[attr-defined]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"
