"""The log's writer: lines written to the stream in batches, a short moment after the first line of each.

Each decision is one log line, and a line written on its own is one `write` system call made by the request's thread.
A system call lets the interpreter hand its lock to another thread, and on a busy worker one always waits: the
request thread then waits in turn to get it back, two context switches per line (in the serving worker, a 1-alert
notification cost ~30–60 µs more with its line written on its own; docs/performance.md). So a record is formatted in
the thread that logs it (outside any lock), appended to a list, and a writer thread writes what has gathered
`FLUSH_SECONDS` after the first line of a batch: one `write` for every line of that moment.

What this keeps:
- order: lines reach the stream in the order they were logged; a record at WARNING or above is written at once,
  by the thread that logs it, together with every line before it;
- nothing lost on the way out: the batch is written at exit (`logging.shutdown`, which `sys.exit` runs) and before
  a fork (gunicorn's master forking its worker must not hand the worker lines it will write itself);
- a bound: more than `MAX_PENDING` characters waiting are written at once by the thread that logs.
A process killed outright (SIGKILL, the OOM killer) loses at most the last `FLUSH_SECONDS` of INFO lines.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import TextIO

FLUSH_SECONDS = 0.1
MAX_PENDING = 64 * 1024  # characters


class BatchingHandler(logging.StreamHandler):
    """A StreamHandler whose INFO and DEBUG lines are written in batches (see the module)."""

    def __init__(self, stream: TextIO | None = None, *, flush_seconds: float = FLUSH_SECONDS) -> None:
        super().__init__(stream)
        self.flush_seconds = flush_seconds
        self._pending: list[str] = []
        self._size = 0
        self._gather = threading.Lock()  # guards `_pending`; never held across a system call
        self._wake = threading.Event()
        self._writer_pid = 0  # the process whose writer thread runs (none yet; a forked child starts its own)
        _HANDLERS.add(self)

    def handle(self, record: logging.LogRecord) -> bool:
        """Format here, outside the handler's lock; queue the line, or write it at once (see the module)."""
        if not self.filter(record):
            return False
        try:
            line = self.format(record) + self.terminator
        except Exception:  # noqa: BLE001 - as logging.Handler.emit: a record that cannot be formatted is reported
            self.handleError(record)
            return False
        with self._gather:
            self._pending.append(line)
            self._size += len(line)
            full = self._size > MAX_PENDING
        if full or record.levelno >= logging.WARNING:
            self.flush()
        elif not self._wake.is_set():
            self._start_writer()
            self._wake.set()
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """What `handle` does, for a caller that bypasses it."""
        self.handle(record)

    def flush(self) -> None:
        """Write every waiting line now, in order (the handler's lock: one batch at a time)."""
        with self.lock:  # type: ignore[union-attr]
            with self._gather:
                lines, self._pending, self._size = self._pending, [], 0
            if lines and self.stream is not None:
                try:
                    self.stream.write("".join(lines))
                    self.stream.flush()
                except (OSError, ValueError):  # a closed or broken stream: nowhere left to report it
                    pass

    def _start_writer(self) -> None:
        if self._writer_pid == os.getpid():
            return
        self._writer_pid = os.getpid()
        threading.Thread(target=self._write_batches, name="log-writer", daemon=True).start()

    def _write_batches(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.flush_seconds)
            self._wake.clear()  # before the flush: a line logged during it sets it again and is written next time
            self.flush()

    def _forked(self) -> None:
        """In a forked child: a fresh lock (another thread may have held it at the fork), no writer thread yet, and
        none of the parent's lines (a line logged after the flush before the fork is the parent's to write)."""
        self._gather = threading.Lock()
        self._wake = threading.Event()
        self._writer_pid = 0
        self._pending, self._size = [], 0


_HANDLERS: weakref.WeakSet[BatchingHandler] = weakref.WeakSet()
_FORKING: list[BatchingHandler] = []  # the handlers whose lock the forking thread holds


def _before_fork() -> None:
    """Write every batch, then hold each handler's lock across the fork: no writer thread is inside the stream's
    own write (whose buffer lock a child would inherit held) when the process is copied. The child's handler locks
    are made anew by `logging` itself, as for every handler."""
    for handler in list(_HANDLERS):
        handler.flush()
        handler.acquire()
        _FORKING.append(handler)


def _after_fork_in_parent() -> None:
    while _FORKING:
        _FORKING.pop().release()


def _after_fork_in_child() -> None:
    _FORKING.clear()
    for handler in list(_HANDLERS):
        handler._forked()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
