"""Every shell block a reader would paste from README.md or docs/*.md is run, or says why it is not.

How a block is tested is said in an HTML comment on the line before its fence:
- no comment: run as written (bash, `-e`) at the top of a copy of the checkout (what a block writes stays there),
  `.venv/bin/` being this environment's;
- `<!-- run with: reactor sim -->`: run the same way while `reactor sim` serves the demo cluster from that copy and
  has written `.reactor-sim/` (its kubeconfig, token and state key), as after the README's local-run step;
- `<!-- run with: prometheus -->`: run the same way with Prometheus's and Alertmanager's own tools (`promtool`,
  `amtool`, Debian's `prometheus` and `prometheus-alertmanager`); skipped where they are not installed, failed then
  under `PROMSTACK_REQUIRED=1`, as the rule tests are;
- `<!-- run by: tests/FILE.py::test_name[, ...] -->`: a recipe of long-running processes, run step by step by the
  named tests (they must exist);
- `<!-- not run: REASON -->`: it needs what this machine has not (a real cluster, helm, docker, root); the reason
  is required.
Every block, run or not, must parse as bash, and no line may continue (`\\`) into a comment or trailing space: a
`\\ ` pasted into a shell escapes the space, passes it as an argument, and runs the next line as a command of its own.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.pages import ROOT, Block, pages, shell_blocks

BIN = Path(sys.executable).parent
ALL = [block for page in pages() for block in shell_blocks(page)]
TIMEOUT = 120


def _id(block: Block) -> str:
    return block.where


def _here(text: str) -> str:
    return text.replace(".venv/bin/", f"{BIN}/")


def _env(checkout: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTOR_") and k != "KUBERNETES_SERVICE_HOST"}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": str(checkout)}


def _run(block: Block, checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", _here(block.text)], cwd=checkout, env=_env(checkout),
                          capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's files (no .git, no .venv, no caches): a block that writes cannot touch the tree."""
    here = tmp_path_factory.mktemp("checkout") / "gpu-reactor"
    shutil.copytree(ROOT, here, ignore=shutil.ignore_patterns(".git", ".venv", ".reactor-sim", "__pycache__",
                                                                 ".pytest_cache", ".hypothesis", "*.egg-info"))
    return here


@pytest.mark.parametrize("block", ALL, ids=_id)
def test_every_block_parses_and_continues_cleanly(block: Block) -> None:
    parsed = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, f"{block.where}: {parsed.stderr}"
    broken = [line for line in block.text.splitlines() if re.search(r"\\\s+\S|\\[ \t]+$", line)]
    assert broken == [], f"{block.where}: a backslash that does not end its line"


@pytest.mark.parametrize("block", [b for b in ALL if b.marker == "not run"], ids=_id)
def test_a_block_that_is_not_run_says_why(block: Block) -> None:
    assert len(block.reason.split()) >= 3, f"{block.where}: `not run:` needs a reason"


def _test_exists(test_id: str) -> bool:
    path, _, name = test_id.partition("::")
    file = ROOT / path
    return file.is_file() and any(isinstance(node, ast.FunctionDef) and node.name == name
                                  for node in ast.walk(ast.parse(file.read_text())))


@pytest.mark.parametrize("block", [b for b in ALL if b.marker == "run by"], ids=_id)
def test_a_block_run_elsewhere_names_tests_that_exist(block: Block) -> None:
    tests = [t.strip() for t in block.reason.split(",")]
    assert tests and all(_test_exists(t) for t in tests), f"{block.where}: {block.reason}"


@pytest.mark.parametrize("block", [b for b in ALL if b.marker == ""], ids=_id)
def test_the_block_runs_as_written(block: Block, checkout: Path) -> None:
    done = _run(block, checkout)
    assert done.returncode == 0, f"{block.where}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_every_marker_is_one_the_tests_know() -> None:
    """A misspelled marker would leave its block unrun and unexplained."""
    comments = [(page, line) for page in pages() for line in page.read_text().splitlines()
                if re.match(r"<!--\s*(not|run)\b", line.strip())]
    known = [line for _, line in comments if re.match(r"<!--\s*(not run|run by|run with):\s*\S.*-->$", line.strip())]
    assert len(known) == len(comments)
    assert {b.reason for b in ALL if b.marker == "run with"} <= {"reactor sim", "prometheus"}


@pytest.fixture(scope="module")
def sim_checkout(checkout: Path) -> Iterator[Path]:
    """The copied checkout while `reactor sim` serves from it, as the README's local run leaves it."""
    here = checkout
    sim = subprocess.Popen([str(BIN / "reactor"), "sim"], cwd=here, env=_env(here), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert sim.stdout is not None
        printed = []
        for line in sim.stdout:
            printed.append(line)
            if line.startswith("Ctrl-C"):
                break
        assert (here / ".reactor-sim" / "sim.kubeconfig").exists(), "".join(printed)
        yield here
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        sim.wait(timeout=30)
        if sim.stdout is not None:
            sim.stdout.close()
        shutil.rmtree(here / ".reactor-sim", ignore_errors=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("block", [b for b in ALL if (b.marker, b.reason) == ("run with", "reactor sim")], ids=_id)
def test_the_block_runs_against_the_embedded_cluster(block: Block, sim_checkout: Path) -> None:
    done = _run(block, sim_checkout)
    assert done.returncode == 0, f"{block.where}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_the_continuation_check_catches_the_pasted_comment() -> None:
    """The doctor recipe once had `\\       # comment` mid-command: bash ran `--token-file` as a command."""
    block = Block(ROOT, 1, "sh", "reactor doctor \\\n  --as x \\       # why\n  --token-file t\n", "not run", "x y z")
    with pytest.raises(AssertionError, match="backslash"):
        test_every_block_parses_and_continues_cleanly(block)


@pytest.mark.parametrize("block", [b for b in ALL if (b.marker, b.reason) == ("run with", "prometheus")], ids=_id)
def test_the_block_runs_with_prometheus_tools(block: Block, checkout: Path) -> None:
    missing = [tool for tool in ("promtool", "amtool") if shutil.which(tool) is None]
    if missing and os.environ.get("PROMSTACK_REQUIRED") == "1":
        pytest.fail(f"{', '.join(missing)} not installed; PROMSTACK_REQUIRED=1 forbids skipping", pytrace=False)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: prometheus, prometheus-alertmanager)")
    done = _run(block, checkout)
    assert done.returncode == 0, f"{block.where}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
