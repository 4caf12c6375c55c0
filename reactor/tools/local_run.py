"""The recipe `reactor sim` prints for running `reactor serve` locally against it: a ready-to-paste command.

It writes the webhook's bearer token and the state-signing key next to the kubeconfig, and prints the exact
command (the kubeconfig, both files, a free loopback port, the namespaces to allow) and a `curl` to try it with.
It never starts the reactor itself.
"""

from __future__ import annotations

import secrets
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reactor.config.settings import env_name
from reactor.policy.values import SYSTEM_NAMESPACES
from reactor.tools.launcher import free_port
from reactor.tools.seeds import demo_file

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "CronJob", "Job"})


def write_secrets(kubeconfig: Path) -> tuple[Path, Path]:
    """Fresh random secrets next to the kubeconfig, readable by their owner only: the webhook's bearer token
    (`<kubeconfig without suffix>.token`) and the key that signs the reactor's state (`….state-key`)."""
    return _secret(kubeconfig.with_suffix(".token"), 16), _secret(kubeconfig.with_suffix(".state-key"), 32)


def _secret(path: Path, size: int) -> Path:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(secrets.token_hex(size) + "\n", encoding="utf-8")
    return path.resolve()


def allowed_namespaces(objects: Iterable[dict[str, Any]]) -> list[str]:
    """The namespaces the seeds put GPU workloads in (system namespaces left out); `['*']` when there are none.

    Only workloads that ask for a GPU count: the reactor's own namespace (deploy/reactor seeds its Deployment there)
    holds no GPU workload, and its ServiceAccount has no rights on workloads there, so allowing it made a reactor
    served with `reactor sim --rbac`'s kubeconfig answer 403s and never become ready."""
    found = {(o.get("metadata") or {}).get("namespace") for o in objects
             if o.get("kind") in WORKLOAD_KINDS and _asks_for_gpus(o)}
    names = sorted(n for n in found if isinstance(n, str) and n and n not in SYSTEM_NAMESPACES)
    return names or ["*"]


def _asks_for_gpus(obj: dict[str, Any]) -> bool:
    """A container of its pod template (at any depth: a CronJob's is in its jobTemplate) requests or limits an
    extended resource named `…/gpu` (nvidia.com/gpu, amd.com/gpu)."""
    stack: list[Any] = [obj.get("spec")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("limits", "requests"):
                quantities = node.get(key)
                if isinstance(quantities, dict) and any(str(k).endswith("/gpu") for k in quantities):
                    return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def reactor_program() -> list[str]:
    """How to run `reactor` from this installation, whether or not its environment is activated."""
    script = Path(sys.executable).parent / "reactor"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "reactor"]


def serve_command(kubeconfig: Path, secret_files: tuple[Path, Path], listen: str, allow: list[str],
                  prometheus_url: str) -> str:
    """`REACTOR_…=… reactor serve`: every setting in the environment, so no policy file is needed; both
    listeners on loopback (the probes' default, 0.0.0.0:8081, would be reachable from outside and collide); alerts
    confirmed against `prometheus_url` (the Prometheus stand-in `reactor sim` serves)."""
    token, state_key = secret_files
    env = {
        "kube.kubeconfig": str(kubeconfig.resolve()),
        "server.tokenFile": str(token),
        "state.keyFile": str(state_key),
        "server.listen": listen,
        "server.probeListen": f"127.0.0.1:{free_port()}",
        "namespaces.allow": ",".join(allow),
        "confirm.prometheusUrl": prometheus_url,
        "logging.format": "text",
    }
    words = [f"{env_name(key)}={shlex.quote(value)}" for key, value in env.items()]
    return " ".join([*words, *map(shlex.quote, reactor_program()), "serve"])


def demo_alerts() -> Path:
    """The notification the printed `curl` sends; the Prometheus stand-in of `reactor sim` fires its alerts."""
    return demo_file("alerts-underutilized.json")


def curl_command(token: Path, listen: str, body: Path) -> str:
    auth = f'"Authorization: Bearer $(cat {shlex.quote(str(token))})"'
    return (f"curl -sS -H {auth} -H 'Content-Type: application/json' --data @{shlex.quote(str(body))} "
            f"http://{listen}/alerts")


def print_serve_recipe(kubeconfig: Path, secret_files: tuple[Path, Path], allow: list[str], *, demo: bool,
                       prometheus_url: str) -> None:
    listen = f"127.0.0.1:{free_port()}"
    token, state_key = secret_files
    print(f"webhook token: {token}   state key: {state_key}")
    print("run the reactor against it (in another shell):")
    print(f"  {serve_command(kubeconfig, secret_files, listen, allow, prometheus_url)}")
    if demo:
        print("then send it a notification:")
        print(f"  {curl_command(token, listen, demo_alerts())}")
    else:
        print(f"then POST Alertmanager webhook bodies to http://{listen}/alerts with that bearer token")
    print("Ctrl-C stops the cluster.", flush=True)
