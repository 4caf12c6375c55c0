"""The documentation stays true to the code: the policy reference (docs/policy.md) documents every key the settings
accept, every skip reason is explained (docs/actions.md), and the recipes of README.md and docs/rules.md run as
written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from reactor.config.settings import _SCHEMA, env_name

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
POLICY = (ROOT / "docs" / "policy.md").read_text()
ACTIONS = (ROOT / "docs" / "actions.md").read_text()
RULES = (ROOT / "docs" / "rules.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_policy_key_is_in_the_reference_table() -> None:
    rows = {m for line in POLICY.splitlines() if line.startswith("| `")
            for m in re.findall(r"`([A-Za-z.]+)`", line.split("|")[1])}
    missing = [key for key in _SCHEMA if key not in rows]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_environment_override_examples_are_real_names(page: Path) -> None:
    for name in re.findall(r"\bREACTOR_[A-Z_]+", page.read_text()):
        assert name in {env_name(k) for k in _SCHEMA}, name


def test_quick_start_shows_both_commands() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick and "make test" in quick


def test_every_skip_reason_is_documented() -> None:
    from reactor.core.model import SkipReason
    assert [r.value for r in SkipReason if f"`{r.value}`" not in ACTIONS] == []


# --- The README's recipes, executed as written -------------------------------------------------------------------
# `.venv/bin/` is this environment's bin folder wherever the suite runs from.

def sh_block(heading: str, page: str = README) -> list[str]:
    """The command lines of the first ```sh block after `heading`."""
    section = page.split(heading, 1)[1]
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
    done = subprocess.run(["make", "-o", f"{venv}/.runtime", "demo", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=clean_env(HOME=str(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    for row in ("llm-inference sits idle", "applied: resize-gpu server 4 → 1", "skipped: namespace-not-allowed"):
        assert row in done.stdout
    assert "reactor_actions_total{" in done.stdout
    assert re.search(r"https?://\S+/metrics", done.stdout) is None, "a metrics URL of a server that has exited"
    assert "Traceback" not in done.stdout + done.stderr


def test_make_demo_installs_the_runtime_only(tmp_path: Path) -> None:
    """The first `make demo` installs what `reactor demo` runs on, not the test tools (pytest, helm's engine, mypy:
    hundreds of MB and minutes a newcomer waits for nothing); `make test` adds them."""
    plan = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    assert "pip install -q -e .\n" in plan and "[test]" not in plan, plan
    plan = subprocess.run(["make", "-n", "test", f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    assert "pip install -q -e '.[test]'" in plan, plan


@pytest.mark.slow
def test_the_tuning_steps_keep_the_rule_checks_green(tmp_path: Path) -> None:
    """A copy of the repository's rules, deploy manifests and tests; the README's steps run there as written."""
    for folder in ("rules", "deploy", "docs", "tests"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (edit, render, check, commit) = sh_block("To tune a threshold", RULES)
    assert commit.startswith("git add") and "0.30" in edit
    for line in (edit, render):
        subprocess.run(here(line), shell=True, cwd=tmp_path, check=True, timeout=120, env=clean_env())
    assert "< 0.25" in (tmp_path / "rules/gpu-reactor.rules.yaml").read_text()
    required = os.environ.get("PROMSTACK_REQUIRED", "")
    done = subprocess.run(here(check) + " -q -p no:cacheprovider", shell=True, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=clean_env(PROMSTACK_REQUIRED=required))
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]


def _printed(process: subprocess.Popen[str], timeout: float = 60) -> list[str]:
    """What `reactor sim` printed up to its last line ("Ctrl-C stops the cluster.")."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (lines and lines[-1].startswith("Ctrl-C")):
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
    assert lines and lines[-1].startswith("Ctrl-C"), lines
    return lines


def _shape(line: str) -> list[str]:
    """A command's words with paths and ports left out: variable names, the program's name, curl's flags."""
    words = [w.split("=", 1)[0] + "=" if "=" in w and w.startswith("REACTOR_") else w for w in shlex.split(line)]
    return [Path(w).name if "/" in w and not w.startswith(("http", "@", "Authorization")) else w for w in words
            if not w.startswith(("http://", "@", "Authorization"))]


@pytest.mark.slow
def test_the_local_run_recipe_works_as_written(tmp_path: Path) -> None:
    sim_line, serve_line, curl_line, kubectl_line = sh_block("## Run the reactor locally")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    sim = subprocess.Popen(sim_line, shell=True, cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                           env=clean_env(), start_new_session=True)
    serve: subprocess.Popen[bytes] | None = None
    try:
        printed = _printed(sim)
        serve_cmd = next(line.strip() for line in printed if line.strip().startswith("REACTOR_"))
        curl_cmd = next(line.strip() for line in printed if line.strip().startswith("curl "))
        assert _shape(serve_cmd) == _shape(serve_line) and _shape(curl_cmd) == _shape(curl_line)
        probes = re.search(r"REACTOR_SERVER__PROBE_LISTEN=(127\.0\.0\.1:\d+)", serve_cmd)
        assert probes is not None
        serve = subprocess.Popen(serve_cmd, shell=True, cwd=tmp_path, env=clean_env(), start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_ready(f"http://{probes[1]}/readyz")
        answer = subprocess.run(curl_cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        (outcome,) = json.loads(answer.stdout)["outcomes"]
        assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == ("applied", "resize-gpu", 4, 1)
        if shutil.which("kubectl") is not None:  # the README's fourth line: the change, as kubectl shows it
            shown = subprocess.run(kubectl_line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert json.loads(shown.stdout) == {"nvidia.com/gpu": "1"}, shown.stdout + shown.stderr
    finally:
        for process in (serve, sim):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
        if sim.stdout is not None:
            sim.stdout.close()


def _wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} never answered 200")
