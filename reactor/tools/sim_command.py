"""`reactor sim`: the embedded Kubernetes API server on its own, seeded from ordinary manifests.

Seeds are YAML files or folders (a kustomize entry point such as `deploy/reactor` is rendered with
kubectl); all of them are applied together, so namespaces and CRDs come before what lives in them.
It prints the kubeconfig path for kubectl, and the exact `reactor serve` command (with the token and key files
it wrote) to run the reactor against it; with RBAC on, also how to act as a ServiceAccount, and a kubeconfig
for the reactor's own when the seeds define it (the printed command then uses it). Without seeds it serves the
demo cluster. Beside it, a Prometheus stand-in (tools/prometheus_api.py) the printed command confirms alerts
against: with the demo cluster, its rules fire the alerts of the printed `curl`.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

from reactor.core.errors import UsageError
from reactor.tools.local_run import allowed_namespaces, demo_alerts, print_serve_recipe, write_secrets
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor.tools.seeds import apply_seeds, missing_namespaces, read_seeds
from reactor.tools.signals import STOP_SIGNALS
from reactor_sim import SimCluster
from reactor_sim.versions import NEWEST, KubeVersion

DEFAULT_KUBECONFIG = ".reactor-sim/sim.kubeconfig"  # `reactor sim`'s files, in a folder .gitignore covers


def seed(sim: SimCluster, seeds: list[str]) -> list[dict[str, Any]]:
    """Read every seed (none: the demo cluster), then apply all their objects in one go; prints what each held."""
    found = read_seeds(seeds)
    for path, docs in found:
        print(f"read {len(docs)} objects from {path}")
    for name in missing_namespaces(sim, [d for _, docs in found for d in docs]):
        # A seed may target a namespace another installation owns (kube-prometheus-stack's `monitoring`).
        print(f"creating namespace {name}: the seeds use it but do not define it")
    return apply_seeds(sim, found)


def run_sim(*, seeds: list[str], port: int, kubeconfig: str, rbac: bool = False,
            kube_version: str | None = None) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP. `rbac`: tokens and RBAC, over https (kubectl sends a token only there);
    the kubeconfig then holds the admin token and the CA. `kube_version`: the release played (default the newest
    modelled); one not modelled is a `UsageError` naming those that are."""
    version = kube_version_of(kube_version)
    sim = _start(rbac=rbac, port=port, version=version)
    prometheus = PrometheusStandIn().start()
    try:
        loaded = seed(sim, seeds)
        path = _write_kubeconfig(sim, kubeconfig)
        served = "serves pods/resize" if version.serves_resize else "no pods/resize: in-place resize is 1.33+"
        print(f"embedded cluster (Kubernetes v{version}.0, {served}) at {sim.url}")
        print(f"kubeconfig: {Path(path).resolve()}   (kubectl --kubeconfig {path} get deploy -A)")
        print(f"its files (kubeconfig, webhook token, state key) are in {Path(path).parent.resolve()}/", flush=True)
        reactor_kubeconfig = None
        if rbac:
            print_account_help(path)
            reactor_kubeconfig = write_reactor_kubeconfig(sim, path)
        if not seeds:  # the demo cluster: its rules fire what the printed curl sends
            prometheus.observe(json.loads(demo_alerts().read_text()))
        print(f"Prometheus stand-in (what the reactor confirms alerts against) at {prometheus.url}: its rules fire "
              + ("the alerts of the curl below" if not seeds else "nothing, so a posted alert is unconfirmed"))
        print_serve_recipe(Path(reactor_kubeconfig or path), write_secrets(Path(path)), allowed_namespaces(loaded),
                           demo=not seeds, prometheus_url=prometheus.url)
        sim.run_controllers()
        stop = threading.Event()
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        prometheus.stop()
        sim.stop()
    return 0


def kube_version_of(text: str | None) -> KubeVersion:
    """The release `--kube-version` names (None: the newest modelled)."""
    try:
        return KubeVersion.parse(text or NEWEST)
    except ValueError as e:
        raise UsageError(f"--kube-version {text}", str(e)) from e


def _start(*, rbac: bool, port: int, version: KubeVersion) -> SimCluster:
    try:
        return SimCluster(rbac=rbac, kube_version=version).start(host="127.0.0.1", port=port, tls=rbac)
    except OSError as e:
        raise UsageError(f"--port {port}", f"cannot listen on 127.0.0.1:{port}: {e.strerror}; "
                                          "pick another port, or 0 for any free one") from e
    except RuntimeError as e:  # --rbac without the openssl command
        raise UsageError("--rbac", str(e)) from e


def _write_kubeconfig(sim: SimCluster, kubeconfig: str) -> str:
    """The kubeconfig; by default in a folder of its own (`.reactor-sim/`, made owner-only when new): the token and
    state key beside it are secrets, kept out of the working tree's top where `git add .` would take them. A path
    given with --kubeconfig is written as given: its folder must exist."""
    try:
        if kubeconfig == DEFAULT_KUBECONFIG:
            Path(kubeconfig).parent.mkdir(mode=0o700, exist_ok=True)
        return sim.write_kubeconfig(kubeconfig)
    except OSError as e:
        raise UsageError(f"--kubeconfig {kubeconfig}", f"cannot write: {e.strerror}; give a path in a folder "
                                                       "you can write to") from e


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
