"""`reactor sim`: the embedded Kubernetes API server on its own, seeded from ordinary manifests.

Seeds are YAML files or folders (a kustomize entry point such as `deploy/reactor` is rendered with
kubectl); all of them are applied together, so namespaces and CRDs come before what lives in them.
It prints the kubeconfig path for kubectl, and the exact `reactor serve` command (with the token file it
wrote) to run the reactor against it. Without seeds it serves the demo cluster.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..sim import SimCluster
from .local_run import allowed_namespaces, print_serve_recipe, write_token
from .seeds import apply_seeds, missing_namespaces, read_seeds
from .signals import STOP_SIGNALS


def seed(sim: SimCluster, seeds: list[str]) -> list[dict[str, Any]]:
    """Read every seed (none: the demo cluster), then apply all their objects in one go; prints what each held."""
    found = read_seeds(seeds)
    for path, docs in found:
        print(f"read {len(docs)} objects from {path}")
    for name in missing_namespaces(sim, [d for _, docs in found for d in docs]):
        # A seed may target a namespace another installation owns (kube-prometheus-stack's `monitoring`).
        print(f"creating namespace {name}: the seeds use it but do not define it")
    return apply_seeds(sim, found)


def run_sim(*, seeds: list[str], port: int, kubeconfig: str, rbac: bool = False) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP. `rbac`: tokens and RBAC, over https (kubectl sends a token only there);
    the kubeconfig then holds the admin token and the CA."""
    sim = _start(rbac=rbac, port=port)
    try:
        loaded = seed(sim, seeds)
        path = sim.write_kubeconfig(kubeconfig)
        print(f"embedded cluster at {sim.url}")
        print(f"kubeconfig: {Path(path).resolve()}   (kubectl --kubeconfig {path} get deploy -A)", flush=True)
        print_serve_recipe(Path(path), write_token(Path(path)), allowed_namespaces(loaded), demo=not seeds)
        sim.run_controllers()
        stop = threading.Event()
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        sim.stop()
    return 0


def _start(*, rbac: bool, port: int) -> SimCluster:
    try:
        return SimCluster(rbac=rbac).start(host="127.0.0.1", port=port, tls=rbac)
    except OSError as e:
        raise UsageError(f"--port {port}", f"cannot listen on 127.0.0.1:{port}: {e.strerror}; "
                                          "pick another port, or 0 for any free one") from e
    except RuntimeError as e:  # --rbac without the openssl command
        raise UsageError("--rbac", str(e)) from e
