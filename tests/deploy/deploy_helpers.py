"""Shared loaders for the deploy/ tests: raw manifest files, kustomize output, the policy.

Rendering needs `kubectl kustomize` (or `kustomize build`); tests that need it skip with a reason
where neither is installed. Everything else reads the committed files directly.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# deploy/alertmanager and deploy/prometheus belong to other owners and are tested with them.
OWNED = ("base", "reactor", "examples")
ENTRY_POINTS = ("base", "reactor", "reactor/monitoring", "examples", "examples/amd-gpu")
KUSTOMIZE_KINDS = {"Kustomization", "Component"}


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def manifest_files() -> list[Path]:
    """Every YAML file under the owned deploy/ folders that holds Kubernetes objects."""
    files = []
    for top in OWNED:
        for path in sorted((DEPLOY / top).rglob("*.yaml")):
            docs = load_all(path)
            if docs and all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs):
                if not any(d["kind"] in KUSTOMIZE_KINDS for d in docs):
                    files.append(path)
    return files


def objects(folder: str) -> list[dict[str, Any]]:
    """The objects in the files of one deploy/ folder (not rendered)."""
    out: list[dict[str, Any]] = []
    for path in manifest_files():
        if path.parent == DEPLOY / folder:
            out.extend(load_all(path))
    return out


def one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _kustomize_cmd() -> list[str] | None:
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    return None


@cache
def _render(entry: str) -> tuple[dict[str, Any], ...]:
    cmd = _kustomize_cmd()
    assert cmd is not None
    done = subprocess.run([*cmd, str(DEPLOY / entry)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kustomize {entry} failed:\n{done.stderr}"
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def render(entry: str) -> list[dict[str, Any]]:
    if _kustomize_cmd() is None:
        pytest.skip("neither kubectl nor kustomize is installed: cannot render kustomize entry points")
    return list(_render(entry))


def containers(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod = spec["template"]["spec"]
    yield from pod.get("initContainers", [])
    yield from pod["containers"]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]
