"""The layering (CONTRIBUTING.md, "Layers and import rules"), pinned.

The import rules themselves are import-linter contracts in pyproject.toml (`make lint`): the stages' order, the pure
policy, only the cluster gateway importing `kubernetes`, the service never importing the embedded cluster, the
embedded cluster standing alone, only the command line reaching the development tools, no cycles.
import-linter builds its graph with grimp, which resolves every import form, `from .. import x` included. Here: the
contracts hold on this tree, the checker really catches a relative import that breaks a layer, and what an import
rule cannot say (the policy reads no clock, opens no file; `ls reactor/` reads as the pipeline).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "reactor"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"), ("time", "time"),
               ("time", "monotonic")}

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not LINT_IMPORTS.exists(),
                                 reason="import-linter is not installed (make lint needs it)")]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def copy_of_the_tree(tmp_path: Path) -> Path:
    for name in ("reactor", "reactor_sim"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contracts_hold_on_this_tree() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout or " broken" not in result.stdout


@pytest.mark.parametrize(("module", "source", "contract"), [
    # The form the hand-written check could not see: a relative import of a package, recorded as bare `reactor`.
    ("reactor/policy/leak.py", "from .. import engine\n", "The stages, top to bottom"),
    ("reactor/policy/leak.py", "from ..cluster import kube\n", "The stages, top to bottom"),
    ("reactor/state/leak.py", "from ..act.actor import Actor\n", "The stages, top to bottom"),
    ("reactor/policy/leak.py", "from . import decision\nimport time\n", "The policy is pure"),
    ("reactor/observe/leak.py", "from kubernetes import client\n", "Only the cluster gateway imports the kubernetes"),
    ("reactor/act/leak.py", "import reactor_sim.server\n", "The service never imports the embedded cluster"),
    ("reactor_sim/leak.py", "from reactor.core import model\n", "The embedded cluster stands alone"),
], ids=["relative-package-up", "relative-subpackage-up", "relative-module-up", "policy-io", "kubernetes",
        "sim", "sim-alone"])
def test_the_checker_catches_a_broken_contract(tmp_path: Path, module: str, source: str, contract: str) -> None:
    root = copy_of_the_tree(tmp_path)
    (root / module).write_text(f'"""A deliberate break."""\n{source}')
    result = lint_imports(root)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and module.replace("/", ".").removesuffix(".py") in broken, result.stdout


def test_a_cycle_between_stage_modules_is_caught(tmp_path: Path) -> None:
    """workloads ↔ compute was such a cycle; both live in `cluster` now, so no layer rule sees it."""
    root = copy_of_the_tree(tmp_path)
    compute = root / "reactor/cluster/compute.py"
    compute.write_text(compute.read_text() + "\nfrom . import workloads  # noqa: E402\n")
    result = lint_imports(root)
    assert result.returncode != 0 and "No import cycles" in result.stdout.split("Broken contracts", 1)[-1]


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("policy/*.py")), ids=lambda p: p.name)
def test_the_policy_reads_no_clock_and_opens_nothing(path: Path) -> None:
    """The decision is a pure function: the clock is an argument and every fact comes in as a value or reader."""
    calls = [node.func for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)]
    opens = [c.id for c in calls if isinstance(c, ast.Name) and c.id in ("open", "print", "input")]
    clocks = [f"{c.value.id}.{c.attr}" for c in calls if isinstance(c, ast.Attribute) and isinstance(c.value, ast.Name)
              and (c.value.id, c.attr) in CLOCK_CALLS]
    assert opens == [] and clocks == []


def test_the_top_of_the_package_reads_as_the_pipeline() -> None:
    """`ls reactor/` shows one package per stage, the engine that runs them, what they stand on, the sources the
    reactor asks (the monitoring stack), and the two wings."""
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert top == {
        "__init__.py", "__main__.py", "py.typed",
        "intake", "engine", "resolve", "policy", "act", "state", "observe",  # the pipeline, in order
        "cluster", "integrations", "config", "core",  # what the stages stand on
        "sources",  # what the reactor asks of the monitoring stack (Alertmanager, Prometheus)
        "app", "tools",  # the wings: entry points, development tools
    }
