"""Where each configuration value came from (a file's key or a `REACTOR_*` variable), and every problem found.

It turns a parsed policy document and an environment into raw values tagged with their origin, and gathers
problems so that a file with three mistakes reports three, each named by its source, with a "did you mean"
for misspelled keys and variables. It must not parse or bound the values themselves: that is the schema's job.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

from reactor.core.errors import ConfigError, ConfigErrors

ENV_PREFIX = "REACTOR_"


@dataclass(frozen=True, slots=True)
class Origin:
    """The schema path of a value and where it was written: a file, a variable, or neither (a plain document)."""

    path: str
    file: str | None = None
    variable: str | None = None

    def name(self, key: str) -> str:
        """How a problem names the value: `policy.yaml: cooldown`, `REACTOR_COOLDOWN`, or the bare key."""
        if self.variable is not None:
            return self.variable if key == self.path else f"{self.variable}: {key}"
        return f"{self.file}: {key}" if self.file else key


Raw = dict[str, tuple[Any, Origin]]


class Problems:
    """Every problem found so far; `raise_any` raises them together as one `ConfigErrors`."""

    def __init__(self) -> None:
        self.found: list[ConfigError] = []

    def add(self, where: str, problem: str) -> None:
        self.found.append(ConfigError(where, problem))

    @contextmanager
    def checking(self, origin: Origin) -> Iterator[None]:
        """Record a `ConfigError` raised inside, renamed by its origin, instead of stopping at it."""
        try:
            yield
        except ConfigError as e:
            self.add(origin.name(e.key), e.problem)

    def raise_any(self) -> None:
        if self.found:
            raise ConfigErrors(self.found)


def suggestion(word: str, known: Collection[str]) -> str:
    """`; did you mean 'cooldown'?` for a near miss, else a pointer to the reference."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    if close:
        return f"; did you mean {close[0]!r}?"
    return " (see docs/policy.md, the policy reference)"


def file_values(doc: Mapping[Any, Any], *, schema: Collection[str], sections: Collection[str], file: str | None,
                problems: Problems) -> Raw:
    """The document's values by schema path (`server.listen`); unknown keys become problems."""
    found: Raw = {}
    for key, value in doc.items():
        where = Origin(str(key), file)
        if not isinstance(key, str):
            problems.add(where.name(str(key)), "keys must be strings")
        elif key in sections and key not in schema:
            found.update(_section(key, value, where, schema, problems))
        elif key in schema:
            found[key] = (value, where)
        else:
            problems.add(where.name(key), "unknown key" + suggestion(key, [*schema, *sections]))
    return found


def _section(key: str, value: Any, where: Origin, schema: Collection[str], problems: Problems) -> Raw:
    if not isinstance(value, dict):
        problems.add(where.name(key), f"expected a mapping, got {value!r}")
        return {}
    found: Raw = {}
    for sub, subvalue in value.items():
        path = f"{key}.{sub}"
        if path in schema:
            found[path] = (subvalue, Origin(path, where.file))
        else:
            problems.add(Origin(path, where.file).name(path), "unknown key" + suggestion(path, schema))
    return found


def env_values(environ: Mapping[str, str], variables: Mapping[str, str], problems: Problems) -> Raw:
    """Values of the known `REACTOR_*` variables (`variables`: name → schema path); unknown ones are problems.

    Each value is read as YAML; one that is not YAML at all (`*`, `[oops`) is taken as the string it is."""
    found: Raw = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        path = variables.get(name)
        if path is None:
            problems.add(name, "unknown variable" + suggestion(name, variables))
            continue
        try:
            found[path] = (yaml.safe_load(text), Origin(path, variable=name))
        except yaml.YAMLError:
            found[path] = (text, Origin(path, variable=name))
    return found
