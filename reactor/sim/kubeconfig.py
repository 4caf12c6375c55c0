"""A kubeconfig file that points kubectl and the official client at a running simulator."""

from __future__ import annotations

from pathlib import Path

import yaml


def render(url: str, token: str | None, name: str = "sim") -> str:
    user: dict[str, str] = {"token": token} if token else {}
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": f"{name}-user", "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-user", "namespace": "default"}}],
        "current-context": name,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: str | Path, url: str, token: str | None) -> str:
    target = Path(path)
    target.write_text(render(url, token))
    return str(target)
