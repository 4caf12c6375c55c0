"""Typed parsers for the policy file's values: each takes (key, raw) and returns a value or raises ConfigError.

They say what was expected and what was found, naming the key, so a bad policy file is fixed in one go.
Each parser also carries the JSON schema of what it accepts (`json_schema_of`), from which the Helm chart's
`values.schema.json` is generated (reactor/config/json_schema.py): one description, two checkers that agree.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from reactor.core.errors import ConfigError
from reactor.core.quantity import milli_value
from reactor.core.quantity import value as quantity_value

# Prometheus's duration syntax: units from largest to smallest, each at most once (`1d12h`, `500ms`, `0`).
_UNITS = (("y", timedelta(days=365)), ("w", timedelta(weeks=1)), ("d", timedelta(days=1)), ("h", timedelta(hours=1)),
          ("m", timedelta(minutes=1)), ("s", timedelta(seconds=1)), ("ms", timedelta(milliseconds=1)))
_DURATION = re.compile("^" + "".join(rf"(?:(\d+){u}{'(?!s)' if u == 'm' else ''})?" for u, _ in _UNITS) + "$")
_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

Parser = Callable[[str, Any], Any]
_DESCRIBED: dict[Parser, dict[str, Any]] = {}
# The JSON-schema (RE2, as Helm's validator runs it) spelling of `_DURATION`: without the `m(?!s)` look-ahead the
# anchored language is the same (`5ms` still matches only as milliseconds).
DURATION_PATTERN = "^(0|" + "".join(f"([0-9]+{u})?" for u, _ in _UNITS) + ")$"
# apimachinery's resource.Quantity syntax (its OpenAPI pattern), without a sign: every bound here is positive.
QUANTITY_PATTERN = (r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


def described(schema: dict[str, Any]) -> Callable[[Parser], Parser]:
    """Record the JSON schema of what `parse` accepts (what a schema can say; the parser stays the authority)."""

    def register(parse: Parser) -> Parser:
        _DESCRIBED[parse] = schema
        return parse

    return register


def json_schema_of(parse: Parser) -> dict[str, Any]:
    """The JSON schema recorded for a parser; a parser without one is a bug the schema test catches."""
    try:
        return copy.deepcopy(_DESCRIBED[parse])
    except KeyError:
        raise TypeError(f"parser {getattr(parse, '__qualname__', parse)!r} has no JSON schema (fields.described)") \
            from None


def at_most_pattern(limit: int) -> str:
    """An RE2 pattern of the decimal numerals (leading zeros allowed) whose value is at most `limit` (>= 0)."""
    digits = str(limit)
    shorter = [f"[0-9]{{1,{len(digits) - 1}}}"] if len(digits) > 1 else []
    same = [digits[:i] + (f"[0-{int(d) - 1}]" if d != "1" else "0") + (f"[0-9]{{{len(digits) - i - 1}}}"
                                                                          if i < len(digits) - 1 else "")
            for i, d in enumerate(digits) if d != "0"]
    return "0*(" + "|".join([*shorter, *same, digits]) + ")"


def bounded_duration_pattern(hi: timedelta) -> str:
    """DURATION_PATTERN with each unit's number at most `hi` in that unit (`8d` refused under 7d; `7d1h`, whose
    parts each fit, still passes: a schema pattern cannot add the parts up — check-config and the render do)."""
    parts = "".join(f"({at_most_pattern(hi // unit)}{u})?" for u, unit in _UNITS)
    return f"^(0|{parts})$"


def duration_schema(lo: timedelta | None = None, hi: timedelta | None = None) -> dict[str, Any]:
    """A duration: a Prometheus-style string (bounded where the range is known), or the number 0."""
    pattern = DURATION_PATTERN if hi is None else bounded_duration_pattern(hi)
    return {"anyOf": [{"type": "string", "minLength": 1, "pattern": pattern}, {"type": "integer", "enum": [0]}]}


def parse_duration(key: str, raw: Any) -> timedelta:
    """Durations are written like Prometheus's: `500ms`, `30s`, `10m`, `2h`, `1h30m`, `7d`.

    A bare number other than 0 is refused, as Prometheus refuses it: `cooldown: 30` read as 30 seconds looked like
    30 minutes to whoever wrote it, and the rails it sets would quietly be sixty times shorter."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise ConfigError(key, f"expected a duration like '30m', got {raw!r}")
    if isinstance(raw, int):
        if raw == 0:
            return timedelta(0)
        raise ConfigError(key, f"a duration needs a unit: write '{raw}s' for seconds or '{raw}m' for minutes "
                               f"(got the bare number {raw})")
    text = raw.strip()
    m = _DURATION.match(text)
    if text == "0":
        return timedelta(0)
    if not text or m is None:
        raise ConfigError(key, f"expected a duration like '500ms', '30s', '10m', '2h' or '7d', got {raw!r}")
    return sum((int(n) * unit for n, (_, unit) in zip(m.groups(), _UNITS, strict=True) if n), timedelta(0))


def format_duration(value: timedelta) -> str:
    """The inverse of `parse_duration`, as a person writes it: `30m`, `1h30m`, `7d`, `500ms`, `0s`."""
    rest = value
    parts = []
    for suffix, unit in _UNITS[2:]:
        count, rest = divmod(rest, unit)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts) or "0s"


def bounded(kind: type, lo: float | None, hi: float | None) -> Callable[[str, Any], Any]:
    def parse(key: str, raw: Any) -> Any:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ConfigError(key, f"expected a number, got {raw!r}")
        if kind is int and not float(raw).is_integer():
            raise ConfigError(key, f"expected a whole number, got {raw!r}")
        value = kind(raw)
        if lo is not None and value < lo or hi is not None and value > hi:
            raise ConfigError(key, f"must be between {lo} and {hi}, got {raw!r}")
        return value

    schema: dict[str, Any] = {"type": "integer" if kind is int else "number"}
    if lo is not None:
        schema["minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    return described(schema)(parse)


def duration_in(lo: timedelta, hi: timedelta) -> Callable[[str, Any], timedelta]:
    def parse(key: str, raw: Any) -> timedelta:
        value = parse_duration(key, raw)
        if not lo <= value <= hi:
            raise ConfigError(key, f"must be between {format_duration(lo)} and {format_duration(hi)}, got {raw!r}")
        return value

    return described(duration_schema(lo, hi))(parse)


@described({"type": "boolean"})
def boolean(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    raise ConfigError(key, f"expected true or false, got {raw!r}")


def choice(*options: str) -> Callable[[str, Any], str]:
    def parse(key: str, raw: Any) -> str:
        if raw not in options:
            raise ConfigError(key, f"must be one of {', '.join(options)}, got {raw!r}")
        return str(raw)

    return described({"enum": list(options)})(parse)


@described({"type": ["string", "null"]})
def opt_str(key: str, raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ConfigError(key, f"expected a string, got {raw!r}")
    return raw


@described({"type": "string", "pattern": _RESOURCE.pattern})
def resource(key: str, raw: Any) -> str:
    if not isinstance(raw, str) or not _RESOURCE.match(raw):
        raise ConfigError(key, f"expected an extended resource name like 'nvidia.com/gpu', got {raw!r}")
    return raw


def names(key: str, raw: Any, *, star: bool = False) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [p.strip() for p in raw.split(",") if p.strip()]
    if not isinstance(raw, list):
        raise ConfigError(key, f"expected a list of names, got {raw!r}")
    for i, name in enumerate(raw):
        ok = isinstance(name, str) and (_DNS_LABEL.match(name) or (star and name == "*"))
        if not ok or len(name) > 253:
            raise ConfigError(f"{key}[{i}]", f"not a valid Kubernetes name: {name!r}")
    return tuple(raw)


_NAME = {"type": "string", "pattern": _DNS_LABEL.pattern, "maxLength": 253}
# A list of names; a comma-separated string is the environment variable's spelling.
described({"anyOf": [{"type": "array", "items": _NAME}, {"type": "string"}, {"type": "null"}]})(names)


@described({"anyOf": [{"type": "array", "items": {"anyOf": [_NAME, {"const": "*"}]}}, {"type": "string"},
                      {"type": "null"}]})
def names_or_star(key: str, raw: Any) -> tuple[str, ...]:
    """`names`, where `*` (every namespace not denied) is a name too."""
    return names(key, raw, star=True)


_LISTEN = r"^[\w.\-\[\]:]*:\d{1,5}$"


@described({"type": "string", "pattern": _LISTEN})
def listen(key: str, raw: Any) -> str:
    if not isinstance(raw, str) or not re.match(_LISTEN, raw):
        raise ConfigError(key, f"expected HOST:PORT, got {raw!r}")
    return raw


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice."""


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping: PyYAML keeps the last silently, so a policy
    with two `cooldown:` lines would run with whichever came second and nobody would be told."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(f"duplicate key {key!r} on line {line} (first on line {seen[key]})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """YAML text as values, duplicate keys refused (yaml.YAMLError)."""
    return yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader subclass


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """A YAML file's content; an unreadable, non-UTF-8 or unparseable file is a ConfigError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(str(path), f"cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), f"not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    try:
        return load_yaml(text)
    except DuplicateKey as e:
        raise ConfigError(str(path), str(e)) from None
    except yaml.YAMLError as e:
        raise ConfigError(str(path), f"not valid YAML: {' '.join(str(e).split())}") from e


def memory_bytes(lo: int, hi: int) -> Callable[[str, Any], int]:
    """A memory size in any spelling Kubernetes takes (`512Mi`, `64Gi`, `2Ti`, `1e9`, bytes), returned in bytes
    (rounded up, as the API server's Value); read by the service's one quantity parser."""

    def parse(key: str, raw: Any) -> int:
        value = _quantity(key, raw, "a memory size like '512Mi' or '64Gi'", quantity_value)
        if not lo <= value <= hi:
            raise ConfigError(key, f"must be between {lo} and {hi} bytes, got {raw!r}")
        return value

    return described(_quantity_schema(lo, hi))(parse)


def millicores(lo: int, hi: int) -> Callable[[str, Any], int]:
    """A CPU quantity in any spelling Kubernetes takes (`500m`, `2`, `1.5`, `1e0`), returned in millicores
    (rounded up, as the API server's MilliValue)."""

    def parse(key: str, raw: Any) -> int:
        value = _quantity(key, raw, "a CPU quantity like '500m' or '2'", milli_value)
        if not lo <= value <= hi:
            raise ConfigError(key, f"must be between {lo}m and {hi}m, got {raw!r}")
        return value

    return described(_quantity_schema(lo / 1000, hi / 1000))(parse)


def _quantity_schema(lo: float, hi: float) -> dict[str, Any]:
    """A quantity string (its range is the parser's to check) or a plain number within the range."""
    return {"anyOf": [{"type": "string", "pattern": QUANTITY_PATTERN}, {"type": "number", "minimum": lo,
                                                                        "maximum": hi}]}


def _quantity(key: str, raw: Any, expected: str, read: Callable[[object], int]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ConfigError(key, f"expected {expected}, got {raw!r}")
    try:
        return read(raw)
    except ValueError as e:
        raise ConfigError(key, f"expected {expected}, got {raw!r} ({e})") from e


def without_credentials(url: str) -> str:
    """A URL as it may be printed (a config error, a log line): any `user:password@` left out."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"
