"""Alertmanager's label matchers, as its own parser reads them: one parser for every tool that reads one.

`reactor doctor` reads the routes and inhibit rules of Alertmanager's loaded config with it, and the stand-in for
Alertmanager's API v2 (alertmanager_api.py) reads `filter` parameters with it, so both agree with Alertmanager on
what a matcher means. Followed: prometheus/alertmanager v0.25.0 pkg/labels/parse.go `ParseMatcher` and
pkg/labels/matcher.go `Matcher`/`NewMatcher` (a regular expression is anchored). Go's RE2 is played by Python's
`re`, the same for the plain alternations and classes a routing tree uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# pkg/labels/parse.go `re` (v0.25.0): label name, operator, the raw value ('=~' before '=').
_MATCHER = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(=~|=|!=|!~)\s*(.*?)\s*$", re.DOTALL)


class MatcherError(ValueError):
    """A matcher Alertmanager would refuse; the message is its own."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher as pkg/labels/matcher.go `Matcher`: `matches` takes the label's value ("" when absent)."""

    name: str
    op: str
    value: str
    pattern: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.op in ("=~", "!~"):
            try:
                object.__setattr__(self, "pattern", re.compile(f"^(?:{self.value})$", re.DOTALL))
            except re.error as e:
                raise MatcherError(f"error parsing regexp: {e}: `{self.value}`") from None
        elif self.op not in ("=", "!="):
            raise MatcherError(f"unknown match type: {self.op}")

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        assert self.pattern is not None
        found = self.pattern.match(value) is not None
        return found if self.op == "=~" else not found

    def admits(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set passes: the label's value, "" when it is absent (a route's or inhibit rule's test)."""
        return self.matches(labels.get(self.name, ""))

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{escaped}"'


def parse_matcher(text: str) -> Matcher:
    """pkg/labels/parse.go `ParseMatcher` (v0.25.0): an optionally quoted value with OpenMetrics escapes (`\\"`,
    `\\n`, `\\\\`; any other backslash is literal); an unescaped quote inside, or a missing closing one, is refused."""
    found = _MATCHER.match(text)
    if found is None:
        raise MatcherError(f"bad matcher format: {text}")
    name, op, raw = found.groups()
    quoted = raw.startswith('"')
    body = raw[1:] if quoted else raw
    out: list[str] = []
    escaped = False
    for i, c in enumerate(body):
        if escaped:
            escaped = False
            out.append("\n" if c == "n" else c if c in '"\\' else "\\" + c)
            continue
        if c == "\\":
            if i < len(body) - 1:
                escaped = True
                continue
            out.append("\\")
        elif c == '"':
            if not quoted or i < len(body) - 1:
                raise MatcherError(f"matcher value contains unescaped double quote: {raw}")
            quoted = False
        else:
            out.append(c)
    if quoted:
        raise MatcherError(f"matcher value contains unescaped double quote: {raw}")
    return Matcher(name, op, "".join(out))
