"""The Dockerfile agrees with the project metadata and the Deployment. (No Docker engine here:
the image is not built; what can be read statically is checked.)"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml

from tests.deploy.deploy_helpers import DEPLOY, ROOT

Instruction = tuple[str, str]


def parse(text: str) -> list[Instruction]:
    """(INSTRUCTION, arguments) pairs, comments dropped and continuation lines joined."""
    out: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse((ROOT / "Dockerfile").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def container() -> dict[str, Any]:
    for doc in yaml.safe_load_all((DEPLOY / "reactor" / "deployment.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            (c,) = doc["spec"]["template"]["spec"]["containers"]
            return c
    raise AssertionError("no Deployment")


def _stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    stages: list[list[Instruction]] = []
    for ins in instructions:
        if ins[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(ins)
    return stages


def _last(instructions: list[Instruction], word: str) -> str:
    found = [args for w, args in instructions if w == word]
    assert found, f"no {word}"
    return found[-1]


def test_parser_joins_continuations() -> None:
    assert parse("# c\nRUN a \\\n  && b\nUSER 1\n") == [("RUN", "a    && b"), ("USER", "1")]


def test_base_images_are_slim_python(instructions: list[Instruction]) -> None:
    args = dict(a.split("=", 1) for w, a in instructions if w == "ARG" and "=" in a)
    for word, rest in instructions:
        if word == "FROM":
            image = rest.split()[0]
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
            assert re.fullmatch(r"python:3\.1[12]-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image), image


def test_multi_stage_wheel_build_from_project_metadata(instructions: list[Instruction]) -> None:
    build, final = _stages(instructions)[0], _stages(instructions)[-1]
    assert len(_stages(instructions)) >= 2
    assert re.search(r"\bAS\s+build\b", build[0][1], re.IGNORECASE)
    assert any(w == "RUN" and re.search(r"pip wheel\b.*\s\.$", a) for w, a in build), "build stage must build wheels from ."
    installs = [a for w, a in final if w == "RUN" and "pip install" in a]
    assert installs and all("--no-index" in a for a in installs), "the final stage installs only the built wheels"
    assert any("gpu_reactor-" in a for a in installs)
    text = (ROOT / "Dockerfile").read_text()
    assert "requirements" not in text.lower(), "dependencies come from pyproject.toml only"


def test_build_context_is_what_the_project_metadata_needs(instructions: list[Instruction], pyproject: dict[str, Any]) -> None:
    copied = set()
    for word, rest in instructions:
        if word == "COPY" and "--from" not in rest:
            *sources, _dest = shlex.split(rest)
            copied.update(s.rstrip("/") for s in sources)
    needed = {"pyproject.toml", pyproject["project"]["readme"]}
    needed |= {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert copied == needed
    # .dockerignore is an allow-list: each copied path must be re-included.
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    for path in copied:
        admitted = False
        for pattern in ignore:
            neg = pattern.startswith("!")
            if fnmatch.fnmatch(path, pattern.lstrip("!").rstrip("/")):
                admitted = neg
        assert admitted, f".dockerignore excludes {path}"


def test_entrypoint_is_the_console_script(instructions: list[Instruction], pyproject: dict[str, Any]) -> None:
    entrypoint = json.loads(_last(instructions, "ENTRYPOINT"))
    assert entrypoint == ["reactor"]
    assert "reactor" in pyproject["project"]["scripts"]


def test_cmd_matches_the_deployment_args(instructions: list[Instruction], container: dict[str, Any]) -> None:
    assert json.loads(_last(instructions, "CMD")) == container["args"] == ["serve", "--config", "/etc/gpu-reactor/policy.yaml"]


def test_user_is_numeric_and_matches_run_as_user(instructions: list[Instruction], container: dict[str, Any]) -> None:
    user = _last(instructions, "USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, "a numeric uid lets the kubelet check runAsNonRoot"
    assert int(uid) == container["securityContext"]["runAsUser"]
    assert int(gid or uid) == container["securityContext"]["runAsGroup"]
    assert any(w == "RUN" and f"--uid {uid}" in a for w, a in instructions)


def test_port_and_python_env(instructions: list[Instruction], container: dict[str, Any]) -> None:
    ports = " ".join(str(p["containerPort"]) for p in container["ports"])
    assert _last(instructions, "EXPOSE") == ports == "8080 8081"
    final = _stages(instructions)[-1]
    env = " ".join(a for w, a in final if w == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
