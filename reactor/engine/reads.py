"""A fresh `Reader` for each notification and each background step: its reads shared, bounded by its deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

from reactor.cluster.cache import Store
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Settings
from reactor.resolve.owners import Reader


class Readers:
    def __init__(self, kube: KubeGateway, settings: Settings, *, cache: Store | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.kube, self.cache, self.monotonic = kube, cache, monotonic
        self._server, self._adapters = settings.server, settings.adapters

    def new(self) -> Reader:
        """The reads of one notification (or of one rebalancer step), the watch-fed store read first."""
        return Reader(self.kube, self._server.max_unknown_pods,
                      self.monotonic() + self._server.notification_deadline.total_seconds(), self.monotonic,
                      cache=self.cache, adapters=self._adapters)
