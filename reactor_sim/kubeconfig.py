"""A kubeconfig file that points kubectl and the official client at a running simulator (with the CA to
trust when it serves https)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def render(url: str, token: str | None, name: str = "sim", *, ca_pem: bytes | None = None) -> str:
    user: dict[str, str] = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": f"{name}-user", "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-user", "namespace": "default"}}],
        "current-context": name,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: str | Path, url: str, token: str | None, *, ca_pem: bytes | None = None) -> str:
    target = Path(path)
    target.write_text(render(url, token, ca_pem=ca_pem))
    return str(target)
