"""Structured logs: a fixed message plus key/value fields, as one JSON object per line in the container.

Field values come from tenants (alert labels, workload names, API error texts): a value must never be
able to start a line of its own or paint the terminal. JSON escapes every control character; the text
format escapes them (`\\n`, `\\x1b`, ...), quotes values that hold spaces, `=` or quotes (logfmt), and
indents the lines of a traceback, so each record is one line that starts with its level.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import UTC, datetime

from reactor.app.log_batches import BatchingHandler

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record. Every decision is a line (one per workload of every notification), so the
    formatter keeps what does not change between lines: the encoder, and the time's text up to the second."""

    def __init__(self) -> None:
        super().__init__()
        self._encode = json.JSONEncoder(default=str).encode
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self._encode(entry)

    def _time(self, created: float) -> str:
        """`2026-12-05T07:04:54.385+00:00`, as `datetime.isoformat(timespec="milliseconds")` writes it in UTC."""
        fraction, whole = math.modf(created)
        micros = round(fraction * 1e6)  # rounded half to even to the microsecond first, as `fromtimestamp` does
        second = int(whole) + micros // 1_000_000
        known = self._second  # one tuple, replaced whole: read without a lock by the threads that log
        if known[0] != second:
            known = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
            self._second = known
        return f"{known[1]}.{micros % 1_000_000 // 1000:03d}+00:00"


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators; the backslash so that an
# escape in the output is always one the formatter wrote.
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NEEDS_QUOTES = re.compile(r'[\s="]')
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str) -> str:
    """`text` with no control character left: `\\n`, `\\t`, `\\x1b`, `\\u2028`, and `\\\\` for a backslash."""
    return _UNSAFE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def _value(value: object) -> str:
    text = escape(str(value))
    if not text or _NEEDS_QUOTES.search(text):
        return '"' + text.replace('"', '\\"') + '"'
    return text


class TextFormatter(logging.Formatter):
    """`level logger: msg key=value …` for people reading a terminal; one line per record (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{escape(k)}={_value(v)}" for k, v in vars(record).items()
                          if k not in _STANDARD and v is not None)
        line = f"{record.levelname.lower():7} {escape(record.name)}: {escape(record.getMessage())} {fields}".rstrip()
        if record.exc_info:
            trace = self.formatException(record.exc_info).splitlines()
            line += "".join(f"\n    | {escape(t)}" for t in trace)
        return line


def configure(fmt: str, level: str) -> None:
    """Root logs to stderr, one formatted line per record, written in batches (reactor/app/log_batches.py).

    A record need not find its caller's frame, nor its thread's and process's names: no line shows them (both
    formatters print the message and the `extra` fields only). The logging HOWTO's "Optimization" section names these
    switches; together they take ~1 µs off each record."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
    handler = BatchingHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
