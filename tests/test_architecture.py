"""The layering (STYLE.md), pinned: who may import whom.

The pipeline sits at the top of `reactor/` (web → engine → resolve → policy → act → record, over model and
configuration); entry points live in `reactor/app`, development tools in `reactor/tools`, the embedded cluster
in `reactor/sim`. The pipeline imports none of those wings; the policy imports no I/O library and reads no clock;
only the `kube` package imports `kubernetes`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "reactor"


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved against the package)."""
    tree = ast.parse(path.read_text())
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level]
                if path.name == "__init__.py":
                    base = parts[: len(parts) - node.level + 1][:-1] if node.level > 1 else parts[:-1]
                found.add(".".join([*base, node.module] if node.module else base))
            else:
                found.add(node.module or "")
    return found


def modules(pattern: str) -> list[Path]:
    return sorted(PACKAGE.glob(pattern))


def test_only_the_kube_package_imports_kubernetes() -> None:
    importers = [p.relative_to(PACKAGE).as_posix() for p in modules("**/*.py")
                 if any(m == "kubernetes" or m.startswith("kubernetes.") for m in imports_of(p))]
    assert importers and all(i.startswith("kube/") for i in importers), importers


PURE = modules("policy/*.py") + [PACKAGE / "model.py", PACKAGE / "annotations.py", PACKAGE / "budget.py",
                                  PACKAGE / "workloads.py"]
PIPELINE = [p for p in modules("*.py") if p.name not in ("__main__.py",)] + modules("policy/*.py") + modules("kube/*.py")
# What the pure decision must never touch: I/O of any kind (files, sockets, processes, YAML), and the clock.
IO_MODULES = ("yaml", "socket", "ssl", "urllib", "http", "requests", "pathlib", "io", "os", "shutil", "subprocess",
              "tempfile", "time", "threading", "logging", "json")
CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"), ("time", "time"),
               ("time", "monotonic")}


@pytest.mark.parametrize("path", PURE,
                         ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_pure_layers_import_no_io_library(path: Path) -> None:
    banned = ("flask", "kubernetes", "prometheus_client", "urllib3", "werkzeug", "gunicorn", "reactor.engine",
              "reactor.web", "reactor.kube", "reactor.act", "reactor.resolve", "reactor.sim")
    bad = [m for m in imports_of(path) if m.startswith(banned)]
    assert bad == []


def test_the_simulator_stands_alone() -> None:
    for path in modules("sim/**/*.py"):
        bad = [m for m in imports_of(path) if m.startswith("kubernetes") or (m.startswith("reactor.") and not m.startswith("reactor.sim"))]
        assert bad == [], path


def test_policy_and_engine_do_not_import_the_web_layer() -> None:
    for path in [*modules("policy/*.py"), PACKAGE / "engine.py", *modules("kube/*.py"), PACKAGE / "resolve.py", PACKAGE / "act.py"]:
        assert not any(m.startswith(("reactor.web", "flask")) for m in imports_of(path)), path


@pytest.mark.parametrize("path", modules("policy/*.py"), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_the_policy_does_no_io_and_reads_no_clock(path: Path) -> None:
    """The decision is a pure function: the clock is an argument and every fact comes in as a value or reader."""
    banned = [m for m in imports_of(path) if m.split(".")[0] in IO_MODULES]
    assert banned == []
    tree = ast.parse(path.read_text())
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    opens = [c for c in calls if isinstance(c, ast.Name) and c.id in ("open", "print", "input")]
    clocks = [c for c in calls if isinstance(c, ast.Attribute) and isinstance(c.value, ast.Name)
              and (c.value.id, c.attr) in CLOCK_CALLS]
    assert opens == [] and clocks == []


@pytest.mark.parametrize("path", PIPELINE, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_the_pipeline_imports_no_wing(path: Path) -> None:
    """Entry points, tools and the embedded cluster build on the pipeline, never the other way round."""
    wings = ("reactor.app", "reactor.tools", "reactor.sim")
    assert [m for m in imports_of(path) if m.startswith(wings)] == []


def test_the_app_wing_does_not_import_the_embedded_cluster() -> None:
    """`reactor serve` must never depend on the embedded cluster; the CLI reaches it only through the tools."""
    for path in modules("app/*.py"):
        assert [m for m in imports_of(path) if m.startswith("reactor.sim")] == [], path


def test_only_the_command_line_imports_the_tools() -> None:
    for path in modules("app/*.py"):
        if path.name != "cli.py":
            assert [m for m in imports_of(path) if m.startswith("reactor.tools")] == [], path


def test_the_top_of_the_package_reads_as_the_pipeline() -> None:
    """`ls reactor/` shows the pipeline, its model and configuration, and the three wings; nothing else."""
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert top == {
        "__init__.py", "__main__.py", "py.typed",
        "web.py", "bearer.py", "probes.py", "alerts.py", "engine.py", "resolve.py", "ownership.py", "policy", "act.py",
        "statemac.py", "budget.py", "record.py", "verifier.py", "rollout.py", "lease.py",
        "finops.py",
        "outcome.py", "metrics.py", "kube", "model.py", "annotations.py", "workloads.py", "errors.py",
        "settings.py", "config_sources.py", "fields.py", "app", "tools", "sim",
        "cpu_objects.py", "cpu_act.py",  # the CPU half: its conversions (beside workloads.py), its act part
        "adapters", "adapted.py", "kueue.py",  # operators' resources (adapters) and Kueue-admitted workloads
        "cache.py", "informer.py",  # the watch-fed reads (issue 14)
    }
