"""The README's policy reference documents every key the settings accept, and its quick start is intact."""

from __future__ import annotations

import re
from pathlib import Path

from reactor.settings import _SCHEMA, env_name

README = (Path(__file__).parents[1] / "README.md").read_text()


def test_every_policy_key_is_in_the_reference_table() -> None:
    rows = {m for line in README.splitlines() if line.startswith("| `") for m in re.findall(r"`([A-Za-z.]+)`", line.split("|")[1])}
    missing = [key for key in _SCHEMA if key not in rows]
    assert missing == []


def test_environment_override_examples_are_real_names() -> None:
    for name in re.findall(r"\bREACTOR_[A-Z_]+", README):
        assert name in {env_name(k) for k in _SCHEMA}, name


def test_quick_start_shows_both_commands() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick and "make test" in quick


def test_every_skip_reason_is_documented() -> None:
    from reactor.model import SkipReason
    assert [r.value for r in SkipReason if f"`{r.value}`" not in README] == []
