"""Kubernetes objects read from YAML text, files and folders, as `kubectl apply -f/-k` would find them.

A folder with a kustomization is rendered by `kubectl kustomize` (or `kustomize build`); any other folder
is walked for YAML files of Kubernetes objects, skipping kustomize's own files, YAML that is not an
object (an Alertmanager config, a values file) and Helm charts (templates are YAML only once rendered).
This module reads; applying is the cluster's business.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_KINDS = frozenset({"Kustomization", "Component"})
# libyaml's safe loader where PyYAML was built with it: the same documents as yaml.SafeLoader, ten times
# faster on the operators' 1-2 MB CRDs (tests/sim/test_upstream_crds.py loads all of them).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str, *, strict: bool = True) -> list[Obj]:
    """Every object of a multi-document YAML string (a `…List` is unpacked). `strict`: a document that
    is not an object (no apiVersion/kind) is an error, else it is skipped, as are kustomize's files."""
    docs: list[Obj] = []
    for doc in yaml.load_all(text, Loader=_LOADER):
        if not doc:
            continue
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            if strict:
                raise ValueError(f"not a Kubernetes object (needs apiVersion and kind): {str(doc)[:80]}")
            continue
        if doc["kind"] in KUSTOMIZE_KINDS and str(doc["apiVersion"]).startswith("kustomize.config.k8s.io/"):
            continue
        docs.extend(doc.get("items") or [] if doc["kind"].endswith("List") and "items" in doc else [doc])
    return docs


def read(path: Path) -> list[Obj]:
    """The objects in a file, or under a folder (rendered where it is a kustomize entry point)."""
    if not path.is_dir():
        return parse(path.read_text(encoding="utf-8"))
    if any((path / name).is_file() for name in KUSTOMIZATION_FILES):
        return parse(render(path))
    if (path / "Chart.yaml").is_file():
        return []
    out: list[Obj] = []
    for child in sorted(path.iterdir()):
        if child.is_dir():
            out += read(child)
        elif child.suffix in (".yaml", ".yml"):
            out += parse(child.read_text(encoding="utf-8"), strict=False)
    return out


def render(folder: Path) -> str:
    """`kubectl kustomize FOLDER` (or `kustomize build FOLDER`)."""
    if shutil.which("kubectl"):
        cmd = ["kubectl", "kustomize", str(folder)]
    elif shutil.which("kustomize"):
        cmd = ["kustomize", "build", str(folder)]
    else:
        raise RuntimeError(f"{folder} is a kustomize entry point: rendering it needs kubectl or kustomize on PATH")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return done.stdout
