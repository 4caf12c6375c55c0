"""Every kustomize entry point builds, and every object validates against the Kubernetes schemas.

Schemas: kubernetes-validate's bundled OpenAPI-derived JSON schemas, strict (unknown fields are
errors), for the oldest (1.28) and newest (1.35) Kubernetes this project supports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from packaging.version import Version

from tests.deploy.deploy_helpers import DEPLOY, ENTRY_POINTS, load_all, manifest_files, render

OLDEST, NEWEST_SUPPORTED = Version("1.28"), Version("1.35")
# Custom resources have no bundled schema; their shape is checked in test_deploy_reactor.py.
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def _schema_versions() -> list[str]:
    shipped = [Version(v) for v in kubernetes_validate.utils.all_versions()]
    assert any(v.release[:2] == OLDEST.release for v in shipped), f"kubernetes-validate lacks {OLDEST} schemas"
    newest = max(v for v in shipped if v.release[:2] <= NEWEST_SUPPORTED.release)
    return [f"{OLDEST}.0", str(newest)]


VERSIONS = _schema_versions()


def _validate(obj: dict[str, Any], version: str) -> None:
    if (obj["apiVersion"], obj["kind"]) in CRDS:
        return
    try:
        got = kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for {version}: {path}: {e.message}")
    assert Version(got).release[:2] == Version(version).release[:2], "validated against another version"


def test_the_newest_schema_version_is_1_35_or_older() -> None:
    assert Version(VERSIONS[1]) <= Version("1.35.99") and VERSIONS[0].startswith("1.28")


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_entry_point_builds(entry: str) -> None:
    objs = render(entry)
    assert objs, f"{entry} renders nothing"
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(names) == len(set(names)), f"duplicate objects in {entry}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_rendered_objects_validate(entry: str, version: str) -> None:
    for obj in render(entry):
        _validate(obj, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_manifest_files_validate(path: Path, version: str) -> None:
    """The same check on the committed files, so it also runs where kustomize is not installed."""
    for obj in load_all(path):
        _validate(obj, version)


def test_validation_catches_a_misspelled_field() -> None:
    bad = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "x"},
           "spec": {"limits": [{"type": "Container", "defualt": {"nvidia.com/gpu": "0"}}]}}
    with pytest.raises(pytest.fail.Exception, match="defualt"):
        _validate(bad, VERSIONS[0])


def test_every_entry_point_is_listed() -> None:
    found = {
        str(p.parent.relative_to(DEPLOY))
        for top in ("base", "reactor", "examples")
        for p in (DEPLOY / top).rglob("kustomization.yaml")
        if load_all(p)[0].get("kind", "Kustomization") == "Kustomization"
    }
    assert found == set(ENTRY_POINTS)
