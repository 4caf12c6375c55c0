"""What runs beside the answers — the probe server, the informers, the verifier, the rebalancer, the Events'
sender — and the one order in which the serving process starts and stops it.

Why one list: each part used to be started and stopped by hand in two lists that drifted apart (the rebalancer
started only when rebalancing was on, but was always stopped). `Service.background` (reactor/app/assembly.py)
holds the parts that run in this configuration, in start order; `start_all` starts them in that order and
`stop_all` stops them in reverse, so a part that depends on one before it (the verifier reads the informers'
cache) never outlives it. Each part also offers `run_once`, the one pass its thread repeats, so tests drive it
with no thread at all. This module decides nothing about what a part does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


@runtime_checkable
class Background(Protocol):
    """A part with a thread (or an event loop) of its own: started once, stopped once, or driven pass by pass."""

    def start(self) -> object:
        """Begin in the background; returns at once (or once the part is listening)."""

    def stop(self) -> None:
        """End the background work within a few seconds; what is queued is finished or given up."""

    def run_once(self) -> object:
        """The one pass the background repeats, run now on the caller's thread (what tests call)."""


def start_all(parts: Sequence[Background]) -> None:
    """Start `parts` in order; when one fails to start, the ones already started are stopped (in reverse) and
    the error is raised: a process half started would serve without, say, its probes."""
    started: list[Background] = []
    for part in parts:
        try:
            part.start()
        except BaseException:
            stop_all(started)
            raise
        started.append(part)


def stop_all(parts: Sequence[Background]) -> None:
    """Stop `parts` in reverse order. One that fails to stop is logged and the others are still stopped: an
    exiting process must still send its queued Events."""
    for part in reversed(parts):
        try:
            part.stop()
        except Exception:  # noqa: BLE001 - the others must still stop; the process is exiting
            log.exception("a background part failed to stop", extra={"part": type(part).__name__})
