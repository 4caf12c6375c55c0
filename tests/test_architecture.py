"""Import direction (STYLE.md): web → engine → policy → model; engine → kube; one module imports kubernetes."""

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


def test_exactly_one_module_imports_kubernetes() -> None:
    importers = [p.relative_to(PACKAGE).as_posix() for p in modules("**/*.py")
                 if any(m == "kubernetes" or m.startswith("kubernetes.") for m in imports_of(p))]
    assert importers == ["kube.py"]


@pytest.mark.parametrize("path", modules("policy/*.py") + [PACKAGE / "model.py", PACKAGE / "annotations.py",
                                                           PACKAGE / "budget.py", PACKAGE / "workloads.py",
                                                           PACKAGE / "bounds.py"],
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
    for path in [*modules("policy/*.py"), PACKAGE / "engine.py", PACKAGE / "kube.py", PACKAGE / "resolve.py", PACKAGE / "act.py"]:
        assert not any(m.startswith(("reactor.web", "flask")) for m in imports_of(path)), path
