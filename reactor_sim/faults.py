"""Injected faults: the next N matching requests get an error status, a hang, or a dropped connection.

Holds the rules only; the server decides how to carry a fault out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

MODES = ("status", "timeout", "drop")


@dataclass(slots=True)
class Fault:
    verb: str | None
    resource: str | None
    subresource: str | None
    status: int
    count: int
    retry_after: int | None
    mode: str
    delay: float

    def matches(self, verb: str, resource: str, subresource: str) -> bool:
        return ((self.verb is None or self.verb == verb)
                and (self.resource is None or self.resource == resource)
                and (self.subresource is None or self.subresource == subresource))


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []

    def add(self, fault: Fault) -> None:
        if fault.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {fault.mode!r}")
        if fault.count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            self._rules.append(fault)

    def take(self, verb: str, resource: str, subresource: str) -> Fault | None:
        """The first rule matching this request, with one use consumed."""
        with self._lock:
            for fault in self._rules:
                if fault.matches(verb, resource, subresource):
                    fault.count -= 1
                    if fault.count == 0:
                        self._rules.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
