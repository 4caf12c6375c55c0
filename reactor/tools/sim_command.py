"""`reactor sim`: the embedded Kubernetes API server on its own, seeded from ordinary manifests.

Seeds are YAML files or folders (a kustomize entry point such as `deploy/reactor` is rendered with
kubectl); all of them are applied together, so namespaces and CRDs come before what lives in them.
It prints the kubeconfig path so that kubectl and `reactor serve` can be pointed at it; with RBAC on, also how
to act as a ServiceAccount, and a kubeconfig for the reactor's own when the seeds define it.
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
        if rbac:
            print_account_help(path)
            write_reactor_kubeconfig(sim, path)
        sim.run_controllers()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        sim.stop()
    return 0


# -- ServiceAccounts in RBAC mode ------------------------------------------------------------------------

REACTOR_ACCOUNT = ("gpu-reactor", "gpu-reactor")  # deploy/reactor/serviceaccount.yaml (namespace, name)
ACCOUNT_TOKEN_SECONDS = 24 * 3600


def print_account_help(admin_kubeconfig: str) -> None:
    """How to act as any ServiceAccount: a TokenRequest token in a copy of the admin kubeconfig."""
    print("as a ServiceAccount (RBAC applies):  TOKEN=$(kubectl --kubeconfig "
          f"{admin_kubeconfig} create token NAME -n NAMESPACE --duration=24h)")
    print(f"  cp {admin_kubeconfig} sa.kubeconfig && kubectl --kubeconfig sa.kubeconfig config set-credentials "
          'sim-user --token="$TOKEN"', flush=True)


def write_reactor_kubeconfig(sim: SimCluster, admin_kubeconfig: str) -> str | None:
    """When the seeds hold the reactor's ServiceAccount (deploy/reactor): a kubeconfig with its token beside the
    admin one, and the command that runs `reactor serve` as it. None when the account is not there."""
    namespace, name = REACTOR_ACCOUNT
    if not sim.store.exists("serviceaccounts", namespace, name):
        return None
    admin = Path(admin_kubeconfig)
    target = admin.with_name(f"{admin.stem}-{name}{admin.suffix}")
    path = sim.write_kubeconfig(target, token=sim.service_account_token(namespace, name, seconds=ACCOUNT_TOKEN_SECONDS))
    print(f"kubeconfig of ServiceAccount {namespace}/{name}: {Path(path).resolve()}   (token valid 24h)")
    print(f"  run the reactor as it:  REACTOR_KUBE__KUBECONFIG={path} REACTOR_SERVER__TOKEN_FILE=TOKEN_FILE "
          "REACTOR_STATE__KEY_FILE=KEY_FILE reactor serve --config deploy/reactor/policy.yaml", flush=True)
    return path
