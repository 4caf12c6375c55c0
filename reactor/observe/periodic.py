"""A pass run every interval on a daemon thread, until stopped: the verifier's and the rebalancer's loop.

A pass that raises is logged with its traceback and the next one runs as usual: one bad workload or one API
outage must never end the loop that would have recovered from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, name: str, interval: float, step: Callable[[], object], failed: str) -> None:
        self.name, self.interval, self.step, self.failed = name, interval, step, failed
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - the thread outlives one bad pass; the next one retries
                log.exception(self.failed)


class PeriodicPart:
    """A background part (reactor/app/background.py) whose thread is one `Periodic` (`_loop`): the verifier, the
    rebalancer. `run_once` runs the loop's pass on the caller's thread, as the thread would."""

    _loop: Periodic

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)

    def run_once(self) -> object:
        return self._loop.step()
