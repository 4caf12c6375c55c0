"""The doctor's findings as values, and how they print: one line per check, worst status decides the exit.

Pure: no I/O beyond formatting strings. Checks return `Check`s; they never print or exit.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Status(enum.IntEnum):
    OK = 0
    WARNING = 1
    FAILING = 2


@dataclass(frozen=True, slots=True)
class Check:
    """One finding. `fix` says what to do; it is empty when nothing needs doing."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def ok(name: str, detail: str) -> Check:
    return Check(name, Status.OK, detail)


def warning(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, Status.WARNING, detail, fix)


def failing(name: str, detail: str, fix: str) -> Check:
    return Check(name, Status.FAILING, detail, fix)


def line(check: Check) -> str:
    text = f"{check.status.name.lower():<8} {check.name:<24} {check.detail}"
    return f"{text} -> {check.fix}" if check.fix else text


def exit_code(checks: Iterable[Check]) -> int:
    """1 when any check fails, else 0 (warnings do not fail the preflight)."""
    return 1 if any(c.status is Status.FAILING for c in checks) else 0
