"""The README's policy reference documents every key the settings accept, and its quick start is intact."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reactor.settings import _SCHEMA, env_name

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()


def test_every_policy_key_is_in_the_reference_table() -> None:
    rows = {m for line in README.splitlines() if line.startswith("| `")
            for m in re.findall(r"`([A-Za-z.]+)`", line.split("|")[1])}
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


# --- The README's recipes, executed as written -------------------------------------------------------------------
# `.venv/bin/` is this environment's bin folder wherever the suite runs from.

def sh_block(heading: str) -> list[str]:
    """The command lines of the first ```sh block after `heading`."""
    section = README.split(heading, 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def here(line: str) -> str:
    return line.replace(".venv/bin/", f"{Path(sys.executable).parent}/")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTOR_") and k != "KUBERNETES_SERVICE_HOST"}
    return {**env, **extra}


def test_the_quick_start_plan_works_out_of_the_box() -> None:
    (line,) = sh_block("Then ask what the reactor would do")
    done = subprocess.run(here(line), shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=clean_env())
    assert done.returncode == 0, done.stderr
    assert "workload: Deployment/ml-workloads/llm-inference" in done.stdout
    assert "would apply: resize-gpu server: 4 → 1" in done.stdout


@pytest.mark.slow
def test_make_demo_runs_as_the_quick_start_says(tmp_path: Path) -> None:
    """`make demo`, with this environment standing in for the .venv it would create (`-o`: do not reinstall)."""
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(["make", "-o", f"{venv}/.installed", "demo", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=clean_env(HOME=str(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    for row in ("llm-inference sits idle", "applied: resize-gpu server 4 → 1", "skipped: namespace-not-allowed"):
        assert row in done.stdout
    assert "reactor_actions_total{" in done.stdout
    assert re.search(r"https?://\S+/metrics", done.stdout) is None, "a metrics URL of a server that has exited"
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow
def test_the_tuning_steps_keep_the_rule_checks_green(tmp_path: Path) -> None:
    """A copy of the repository's rules, deploy manifests and tests; the README's steps run there as written."""
    for folder in ("rules", "deploy", "tests"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (edit, render, check, commit) = sh_block("To tune a threshold")
    assert commit.startswith("git add") and "0.30" in edit
    for line in (edit, render):
        subprocess.run(here(line), shell=True, cwd=tmp_path, check=True, timeout=120, env=clean_env())
    assert "< 0.25" in (tmp_path / "rules/gpu-reactor.rules.yaml").read_text()
    required = os.environ.get("PROMSTACK_REQUIRED", "")
    done = subprocess.run(here(check) + " -q -p no:cacheprovider", shell=True, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=clean_env(PROMSTACK_REQUIRED=required))
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]
