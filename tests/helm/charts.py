"""Renders the charts in deploy/helm offline through Helm's own Go engine (helm-python-sdk), as objects.

No helm binary and no cluster: `Chart.render` runs Helm v4's template engine in-process; `lookup` returns
nothing, as in `helm template`.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import yaml

from tests.deploy.deploy_helpers import DEPLOY

CHART = DEPLOY / "helm" / "gpu-reactor"
BASE_CHART = DEPLOY / "helm" / "gpu-reactor-base"
RELEASE, NAMESPACE = "gpu-reactor", "gpu-reactor"
# Labels only Helm adds (kustomize's objects do not carry them), and the pod annotation that rolls the pods.
HELM_LABELS = {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
               "helm.sh/chart", "app.kubernetes.io/part-of"}


@cache
def _chart(path: Path) -> helm_python.Chart:
    return helm_python.Chart.load(str(path))


def render(values: dict[str, Any] | None = None, *, chart: Path = CHART, release: str = RELEASE,
           namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object the chart renders with these values (NOTES.txt left out)."""
    out = _chart(chart).render(values=copy.deepcopy(values or {}), name=release, namespace=namespace)
    objs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            objs.extend(d for d in yaml.safe_load_all(text) if d)
    return objs


def notes(values: dict[str, Any] | None = None) -> str:
    out = _chart(CHART).render(values=copy.deepcopy(values or {}), name=RELEASE, namespace=NAMESPACE)
    return str(out[f"{CHART.name}/templates/NOTES.txt"])


def without_helm_labels(obj: Any) -> Any:
    """The object with Helm's own labels and checksum annotations removed, at every depth (selectors too)."""
    if isinstance(obj, dict):
        out = {k: without_helm_labels(v) for k, v in obj.items()
               if k not in HELM_LABELS and not (isinstance(k, str) and k.startswith("checksum/"))}
        # labels/annotations that held only Helm's own entries disappear, as if never written
        return {k: v for k, v in out.items() if not (k in ("labels", "annotations") and v == {} and obj[k])}
    if isinstance(obj, list):
        return [without_helm_labels(v) for v in obj]
    return obj


def by_key(objs: list[dict[str, Any]]) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
