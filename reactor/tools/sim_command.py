"""`reactor sim`: the embedded Kubernetes API server on its own, seeded from ordinary manifests.

Seeds are YAML files or folders (a kustomize entry point such as `deploy/reactor` is rendered with
kubectl); all of them are applied together, so namespaces and CRDs come before what lives in them.
It prints the kubeconfig path so that kubectl and `reactor serve` can be pointed at it.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ..sim import SimCluster, manifests


def seed(sim: SimCluster, seeds: list[str]) -> list[dict[str, Any]]:
    """Read every seed, then apply all their objects in one go; prints what each seed held."""
    docs: list[dict[str, Any]] = []
    for path in seeds:
        found = manifests.read(Path(path))
        print(f"read {len(found)} objects from {path}")
        docs += found
    defined = {d["metadata"]["name"] for d in docs if d.get("kind") == "Namespace" and d.get("metadata")}
    used = {(d.get("metadata") or {}).get("namespace") for d in docs} - defined - {None, ""}
    for name in sorted(n for n in used if not sim.store.exists("namespaces", None, n)):
        # A seed may target a namespace another installation owns (kube-prometheus-stack's `monitoring`).
        print(f"creating namespace {name}: the seeds use it but do not define it")
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    loaded: list[dict[str, Any]] = sim.apply(docs)
    sim.settle()
    return loaded


def run_sim(*, seeds: list[str], port: int, kubeconfig: str, rbac: bool = False) -> int:
    """Serve until SIGINT/SIGTERM. `rbac`: tokens and RBAC, over https (kubectl sends a token only there);
    the kubeconfig then holds the admin token and the CA."""
    sim = SimCluster(rbac=rbac).start(host="127.0.0.1", port=port, tls=rbac)
    try:
        try:
            seed(sim, seeds)
        except (OSError, ValueError, RuntimeError) as e:
            print(f"reactor sim: cannot load the seeds: {e}", file=sys.stderr)
            return 2
        path = sim.write_kubeconfig(kubeconfig)
        print(f"embedded cluster at {sim.url}")
        print(f"kubeconfig: {Path(path).resolve()}   (kubectl --kubeconfig {path} get deploy -A)", flush=True)
        sim.run_controllers()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        sim.stop()
    return 0
