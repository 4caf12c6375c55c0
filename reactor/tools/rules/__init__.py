"""Prometheus rules for GPU Reactor, rendered from the values SREs tune (`rules/thresholds.yaml`).

`render_command(["render"])` writes `rules/gpu-reactor.rules.yaml` and the PrometheusRule in
`deploy/prometheus/`; `render_command(["render", "--check"])` only compares and prints a diff.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ...errors import ConfigError
from ...fields import read_yaml_file
from .groups import rule_groups
from .output import PROMETHEUS_RULE_FILE, RULES_FILE, Rendered, render_texts, stale_files, write_files
from .values import Values, build_values

DEFAULT_VALUES = Path("rules/thresholds.yaml")

__all__ = [
    "DEFAULT_VALUES",
    "PROMETHEUS_RULE_FILE",
    "RULES_FILE",
    "load_values",
    "render",
    "render_command",
    "render_to",
    "rule_groups",
]


def load_values(path: str | os.PathLike[str]) -> Values:
    """Read and validate a values file; `ConfigError` names the file or the key that is wrong."""
    return build_values(read_yaml_file(path))


def _source_name(values_path: Path, root: Path) -> str:
    try:
        return values_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return values_path.name


def render(values_path: str | os.PathLike[str], root: str | os.PathLike[str] = ".") -> Rendered:
    """The text of both output files for a values file (nothing written)."""
    path = Path(values_path)
    values = load_values(path)
    return render_texts(values, rule_groups(values), source=_source_name(path, Path(root)))


def render_to(values_path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """Render into `root` (e.g. a temp dir for the fast test values); return the plain rule file's path."""
    write_files(render(values_path, root), Path(root))
    return Path(root) / RULES_FILE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reactor rules", description="Render the GPU alerting rules.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("render", help="write the rule files from the values file")
    cmd.add_argument("--values", type=Path, help=f"values file (default: ROOT/{DEFAULT_VALUES})")
    cmd.add_argument("--root", type=Path, default=Path("."), help="repository root the outputs go under")
    cmd.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if outputs are stale")
    return parser


def render_command(argv: list[str]) -> int:
    """`reactor rules render [--values F] [--root D] [--check]`; returns the exit status."""
    args = _parser().parse_args(argv)
    values_path = args.values if args.values is not None else args.root / DEFAULT_VALUES
    try:
        rendered = render(values_path, args.root)
    except ConfigError as e:
        print(f"error: {values_path}: {e}", file=sys.stderr)
        return 2
    if args.check:
        diff = stale_files(rendered, args.root)
        if diff:
            sys.stdout.write(diff)
            print("error: rule files are stale; run `reactor rules render`", file=sys.stderr)
            return 1
        print("rule files are up to date")
        return 0
    for path in write_files(rendered, args.root):
        print(f"wrote {path}")
    return 0
