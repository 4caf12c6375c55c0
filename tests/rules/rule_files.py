"""Reading the rendered rule file and the promtool test files, for the contract checks."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from reactor.core.model import KNOWN_ALERTS
from reactor.tools.rules import render_to

CONTRACT_LABELS = {"severity", "reactor"}
WORKLOAD_LABELS = {"namespace", "pod", "container"}
CONTRACT_ANNOTATIONS = {"value", "gpus", "summary", "description", "runbook_url"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules(rule_file: Path) -> list[dict[str, Any]]:
    return [r for g in load(rule_file)["groups"] for r in g["rules"] if "alert" in r]


def alert_cases(test_file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(test name, alert_rule_test entry) for every alert case of a promtool test file."""
    for test in load(test_file)["tests"]:
        for case in test.get("alert_rule_test", []):
            yield test.get("name", "?"), case


def render_with_tests(values: Path, test_files: Iterable[Path], root: Path) -> Path:
    """Render `values` into `root` and copy the test files to `root/rules/tests/`, where their
    `rule_files: [../gpu-reactor.rules.yaml]` names that render, not the shipped rules; return that folder."""
    tests = render_to(values, root).parent / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for test_file in test_files:
        shutil.copy(test_file, tests / test_file.name)
    return tests


__all__ = ["KNOWN_ALERTS", "alert_rules", "alert_cases", "load", "render_with_tests"]
