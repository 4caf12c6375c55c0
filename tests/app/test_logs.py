"""Log lines cannot be forged: tenant-controlled values (labels, names, error texts) with newlines, ANSI
escapes or other control characters stay inside their own record, in the text format and in JSON."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactor.app.logs import JsonFormatter, TextFormatter, escape

FORGED = "x\nerror   reactor.act.actor: workload patched workload=kube-system/coredns result=applied"
HOSTILE = {
    "newline": FORGED,
    "carriage-return": "ok\rerror   forged",
    "ansi": "\x1b[2J\x1b[31mred\x1b[0m",
    "nul-and-bell": "a\x00b\x07c",
    "c1-next-line": "a\x85b",
    "line-separator": "a\u2028b\u2029c",
    "tab": "a\tb",
    "backslash-n-literal": "a\\nb",
    "field-forgery": "web result=applied",
    "quote": 'say "hi"',
}
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def record(msg: str = "decision", *args: object, exc: bool = False, **fields: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError(FORGED)
        except ValueError:
            exc_info = sys.exc_info()
    rec = logging.LogRecord("reactor.engine", logging.WARNING, __file__, 1, msg, args or None, exc_info)
    rec.__dict__.update(fields)
    return rec


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_text_keeps_each_record_on_one_line_without_control_characters(value: str) -> None:
    line = TextFormatter().format(record(workload=value, alert=value))
    assert "\n" not in line and not CONTROL.search(line), repr(line)
    assert line.startswith("warning reactor.engine: decision ")


def test_text_quotes_values_so_fields_cannot_be_forged() -> None:
    line = TextFormatter().format(record(workload="web result=applied", result="skipped"))
    assert line == 'warning reactor.engine: decision workload="web result=applied" result=skipped'


def test_text_escapes_are_unambiguous() -> None:
    assert escape("a\nb") == "a\\nb" and escape("a\\nb") == "a\\\\nb"  # a literal backslash-n is not a newline
    assert escape("\x1b[31m") == "\\x1b[31m" and escape("\u2028") == "\\u2028" and escape("\x85") == "\\x85"


def test_text_escapes_the_message_and_its_arguments() -> None:
    line = TextFormatter().format(record("resolving %s", FORGED))
    assert "\n" not in line and line.startswith("warning reactor.engine: resolving x\\nerror")


def test_text_indents_every_line_of_a_traceback() -> None:
    lines = TextFormatter().format(record(exc=True)).split("\n")
    assert lines[0] == "warning reactor.engine: decision"
    assert len(lines) > 2 and all(line.startswith("    | ") for line in lines[1:]), lines
    # The exception's own newline makes a new traceback line, never a record: it starts with "    | ".
    assert lines[-2:] == ["    | ValueError: x", "    | " + FORGED.split("\n")[1]]


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_json_keeps_each_record_on_one_line_and_the_value_intact(value: str) -> None:
    line = JsonFormatter().format(record("decision %s", value, workload=value))
    assert "\n" not in line and not CONTROL.search(line), repr(line)
    entry = json.loads(line)
    assert entry["workload"] == value and entry["msg"] == f"decision {value}"


def test_json_keeps_a_traceback_inside_its_record() -> None:
    line = JsonFormatter().format(record(exc=True))
    assert "\n" not in line and FORGED in json.loads(line)["exception"]


@settings(max_examples=2000, deadline=None)
@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))  # 1970 to 2100
def test_json_time_is_spelled_as_isoformat_in_utc(created: float) -> None:
    """The formatter keeps the text of the current second and adds the milliseconds itself; the time must read exactly
    as `datetime.isoformat(timespec="milliseconds")` reads it, rounding at the microsecond included."""
    rec = record()
    rec.created = created
    want = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    assert json.loads(JsonFormatter().format(rec))["time"] == want


def test_json_time_follows_the_clock_across_seconds() -> None:
    formatter, rec = JsonFormatter(), record()
    for created in (1_764_918_294.999, 1_764_918_295.0, 1_764_918_294.5, 1_764_918_295.9996):
        rec.created = created
        want = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert json.loads(formatter.format(rec))["time"] == want


def test_configured_records_skip_what_no_line_shows() -> None:
    """`configure` turns off the caller's frame, thread and process lookups (the logging HOWTO's optimizations): no
    line shows them. Run in a child: the switches are the interpreter's."""
    code = ("import logging, sys; from reactor.app.logs import configure; configure('json', 'INFO'); "
            "r = logging.getLogger('x').makeRecord('x', 20, 'f', 1, 'm', None, None); "
            "print(logging._srcfile, r.thread, r.processName, r.process)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["None", "None", "None", "None"]
