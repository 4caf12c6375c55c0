"""Prometheus rules for GPU Reactor, rendered from the values SREs tune (`rules/thresholds.yaml`).

`render_command(["render"])` writes `rules/gpu-reactor.rules.yaml` and the PrometheusRule in
`deploy/prometheus/`; `render_command(["render", "--check"])` only compares and prints a diff.

`runbookUrl: auto` (the default) is resolved when writing, from the checkout (checkout.py): the links then
point at docs/runbooks.md where the project is hosted, at the commit or tag rendered. Where the checkout came
from is not a value, so `--check` compares against the base already committed.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from reactor.config.fields import read_yaml_file
from reactor.core.errors import ConfigError
from reactor.tools.rules.checkout import UNRESOLVED_HELP, RunbookBase, read_checkout, resolve
from reactor.tools.rules.groups import rule_groups
from reactor.tools.rules.output import (
    PROMETHEUS_RULE_FILE,
    RULES_FILE,
    Rendered,
    committed_runbook_base,
    render_texts,
    stale_files,
    write_files,
)
from reactor.tools.rules.values import AUTO, Values, build_values

DEFAULT_VALUES = Path("rules/thresholds.yaml")

__all__ = [
    "DEFAULT_VALUES",
    "add_render_arguments",
    "run_render",
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


def runbook_base(values: Values, root: Path, *, check: bool = False) -> RunbookBase:
    """The base of the alerts' runbook links: the values' URL, or what `auto` stands for in `root`.

    Unresolvable `auto` keeps the committed base (with a warning) so that a checkout without a remote still
    renders; with nothing committed either it is a `ConfigError` telling the user to set runbookUrl.
    """
    if values.runbook_url != AUTO:
        return RunbookBase(values.runbook_url, "runbookUrl in the values file")
    committed = committed_runbook_base(root)
    if check and committed is not None:
        return RunbookBase(committed, f"the committed {RULES_FILE} (auto is resolved when writing)")
    resolved = resolve(read_checkout(root))
    if resolved is not None:
        return resolved
    if committed is None:
        raise ConfigError("runbookUrl", UNRESOLVED_HELP)
    return RunbookBase(committed, f"kept from the committed {RULES_FILE}", warning=UNRESOLVED_HELP)


def render(values_path: str | os.PathLike[str], root: str | os.PathLike[str] = ".", *,
           check: bool = False) -> Rendered:
    """The text of both output files for a values file (nothing written)."""
    path = Path(values_path)
    values = load_values(path)
    base = runbook_base(values, Path(root), check=check)
    values = replace(values, runbook_url=base.url)
    return render_texts(values, rule_groups(values), source=_source_name(path, Path(root)), runbook=base)


def render_to(values_path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """Render into `root` (e.g. a temp dir for the fast test values); return the plain rule file's path."""
    write_files(render(values_path, root), Path(root))
    return Path(root) / RULES_FILE


def add_render_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--values", type=Path, metavar="FILE", help=f"values file (default: ROOT/{DEFAULT_VALUES})")
    cmd.add_argument("--root", type=Path, default=Path("."), metavar="ROOT",
                     help="the repository root the outputs go under (default: the current folder)")
    cmd.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if outputs are stale")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reactor rules", description="Render the GPU alerting rules.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_render_arguments(sub.add_parser("render", help="write the rule files from the values file"))
    return parser


def render_command(argv: list[str]) -> int:
    """`reactor rules render [--values F] [--root D] [--check]`; returns the exit status."""
    return run_render(_parser().parse_args(argv))


def run_render(args: argparse.Namespace) -> int:
    """Render (or `--check`) as `args` say: 0 done or up to date, 1 stale, 2 no or a bad values file."""
    values_path = args.values if args.values is not None else args.root / DEFAULT_VALUES
    if not values_path.is_file():
        where = "--values" if args.values is not None else f"--root {args.root}"
        print(f"reactor rules render: {where}: no values file at {values_path}; run it in the repository root "
              f"(where {DEFAULT_VALUES} is) or pass --root DIR or --values FILE", file=sys.stderr)
        return 2
    try:
        rendered = render(values_path, args.root, check=args.check)
    except ConfigError as e:
        print(f"reactor rules render: {values_path}: {e}", file=sys.stderr)
        return 2
    if args.check:
        return _check(rendered, args.root)
    for path in write_files(rendered, args.root):
        print(f"wrote {path}")
    print(f"runbook links: {rendered.runbook.url}#<alert> ({rendered.runbook.origin})")
    if rendered.runbook.warning:
        print(f"reactor rules render: warning: runbookUrl: {rendered.runbook.warning}", file=sys.stderr)
    return 0


def _check(rendered: Rendered, root: Path) -> int:
    diff = stale_files(rendered, root)
    if diff:
        sys.stdout.write(diff)
        print("reactor rules render: rule files are stale; run `reactor rules render` and commit them", file=sys.stderr)
        return 1
    print("rule files are up to date")
    return 0
