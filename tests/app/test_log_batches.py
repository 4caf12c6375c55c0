"""The log's writer (reactor/app/log_batches.py): INFO lines reach the stream in batches, in order; a WARNING is
written at once with everything before it; nothing is lost at exit or duplicated across a fork."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reactor.app import log_batches
from reactor.app.log_batches import BatchingHandler

pytestmark = pytest.mark.unit


class Counted(io.StringIO):
    """A stream that counts its writes (each one a system call on a real stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _logger(handler: logging.Handler, name: str) -> logging.Logger:
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger(f"tests.log_batches.{name}")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.DEBUG)
    return log


def _released(handler: logging.Handler) -> bool:
    if handler.lock is None or not handler.lock.acquire(blocking=False):
        return False
    handler.lock.release()
    return True


def _wait_for(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_info_lines_are_written_together_a_moment_after_the_first() -> None:
    stream = Counted()
    handler = BatchingHandler(stream, flush_seconds=0.2)
    log = _logger(handler, "batch")
    for i in range(50):
        log.info("line %d", i)
    assert stream.getvalue() == ""  # not yet: the batch gathers
    _wait_for(lambda: stream.getvalue().count("\n") == 50)
    assert stream.getvalue().splitlines() == [f"INFO line {i}" for i in range(50)]
    assert stream.writes == 1


def test_a_warning_is_written_at_once_after_every_line_before_it() -> None:
    stream = Counted()
    log = _logger(BatchingHandler(stream, flush_seconds=60), "warning")
    log.info("first")
    log.debug("second")
    log.warning("third")
    assert stream.getvalue().splitlines() == ["INFO first", "DEBUG second", "WARNING third"]
    log.error("fourth")
    assert stream.getvalue().splitlines()[-1] == "ERROR fourth"


def test_a_burst_past_the_bound_is_written_by_the_thread_that_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_batches, "MAX_PENDING", 1000)
    stream = Counted()
    log = _logger(BatchingHandler(stream, flush_seconds=60), "burst")
    for i in range(100):
        log.info("%s %d", "x" * 40, i)
    written = stream.getvalue().splitlines()
    assert written == [f"INFO {'x' * 40} {i}" for i in range(len(written))]  # in order, none skipped
    waiting = 100 - len(written)
    assert 0 < waiting and waiting * len(written[-1]) <= 1000  # what waits stays under the bound


def test_a_record_that_cannot_be_formatted_is_reported_and_the_rest_still_written(
        capsys: pytest.CaptureFixture[str]) -> None:
    stream = Counted()
    handler = BatchingHandler(stream, flush_seconds=60)
    log = _logger(handler, "broken")
    log.info("%d", "not a number")
    log.warning("after")
    assert stream.getvalue().splitlines() == ["WARNING after"]
    assert "Logging error" in capsys.readouterr().err


def test_lines_waiting_at_exit_are_written() -> None:
    """`reactor serve`'s logging, an INFO line, then a normal exit: `logging.shutdown` writes the batch."""
    code = ("from reactor.app.logs import configure; import logging; configure('json', 'INFO'); "
            "[logging.getLogger('reactor.x').info('decision', extra={'n': i}) for i in range(3)]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert [line.count('"msg": "decision"') for line in done.stderr.splitlines()] == [1, 1, 1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_neither_loses_nor_repeats_a_line(tmp_path: Path) -> None:
    """gunicorn's master forks its worker: a line the master logged before the fork is written once (by the master,
    before the fork); the worker's own lines are written by the worker's own writer thread."""
    path = tmp_path / "log"
    with path.open("a", buffering=1) as stream:
        log = _logger(BatchingHandler(stream, flush_seconds=0.05), "fork")
        log.info("before the fork")
        pid = os.fork()
        if pid == 0:  # the child: log, let its writer write, leave without the parent's exit handlers
            log.info("in the child")
            time.sleep(0.5)
            os._exit(0)
        os.waitpid(pid, 0)
        free: list[bool] = []  # the handler's lock, held across the fork, is free again in the parent
        probe = threading.Thread(target=lambda: free.append(_released(log.handlers[0])))
        probe.start()
        probe.join()
        assert free == [True]
        log.info("in the parent")
        _wait_for(lambda: "in the parent" in path.read_text())
    assert sorted(path.read_text().splitlines()) == ["INFO before the fork", "INFO in the child", "INFO in the parent"]
