"""Turning SIGINT, SIGTERM and SIGHUP into an exception, so that `finally` blocks stop child processes.

Without it, `kill -TERM` ends a Python process at once and the `reactor serve` child it started (in its own
session, so a terminal's Ctrl-C does not reach it) keeps running under PID 1. It only raises; stopping the
children is the caller's `finally` (`Child.stop`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Signalled(BaseException):
    """A stop signal arrived. A BaseException, like KeyboardInterrupt: no `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Signalled(signum)


@contextmanager
def raising_on_stop_signals() -> Iterator[None]:
    """Inside the block, each stop signal raises `Signalled` in the main thread; the old handlers come back after."""
    previous = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
