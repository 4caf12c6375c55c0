"""The recipe `reactor sim` prints for running `reactor serve` locally against it: a ready-to-paste command.

It writes the webhook's bearer token file next to the kubeconfig and prints the exact command (the
kubeconfig, the token file, a free loopback port, the namespaces to allow), and a `curl` to try it with.
It never starts the reactor itself.
"""

from __future__ import annotations

import secrets
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..policy.values import DEFAULT_DENY
from ..settings import env_name
from .launcher import free_port
from .seeds import demo_file

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "CronJob", "Job"})


def write_token(kubeconfig: Path) -> Path:
    """A fresh random bearer token in `<kubeconfig without suffix>.token`, readable by its owner only."""
    path = kubeconfig.with_suffix(".token")
    path.touch(mode=0o600)
    path.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
    return path.resolve()


def allowed_namespaces(objects: Iterable[dict[str, Any]]) -> list[str]:
    """The namespaces the seeds put workloads in (system namespaces left out); `['*']` when there are none."""
    found = {(o.get("metadata") or {}).get("namespace") for o in objects if o.get("kind") in WORKLOAD_KINDS}
    names = sorted(n for n in found if isinstance(n, str) and n and n not in DEFAULT_DENY)
    return names or ["*"]


def reactor_program() -> list[str]:
    """How to run `reactor` from this installation, whether or not its environment is activated."""
    script = Path(sys.executable).parent / "reactor"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "reactor"]


def serve_command(kubeconfig: Path, token: Path, listen: str, allow: list[str]) -> str:
    """`REACTOR_…=… reactor serve`: every setting in the environment, so no policy file is needed."""
    env = {
        "kube.kubeconfig": str(kubeconfig.resolve()),
        "server.tokenFile": str(token),
        "server.listen": listen,
        "namespaces.allow": ",".join(allow),
        "logging.format": "text",
    }
    words = [f"{env_name(key)}={shlex.quote(value)}" for key, value in env.items()]
    return " ".join([*words, *map(shlex.quote, reactor_program()), "serve"])


def curl_command(token: Path, listen: str, body: Path) -> str:
    auth = f'"Authorization: Bearer $(cat {shlex.quote(str(token))})"'
    return (f"curl -sS -H {auth} -H 'Content-Type: application/json' --data @{shlex.quote(str(body))} "
            f"http://{listen}/alerts")


def print_serve_recipe(kubeconfig: Path, token: Path, allow: list[str], *, demo: bool) -> None:
    listen = f"127.0.0.1:{free_port()}"
    print(f"webhook token: {token}")
    print("run the reactor against it (in another shell):")
    print(f"  {serve_command(kubeconfig, token, listen, allow)}")
    if demo:
        print("then send it a notification:")
        print(f"  {curl_command(token, listen, demo_file('alerts-underutilized.json'))}")
    else:
        print(f"then POST Alertmanager webhook bodies to http://{listen}/alerts with that bearer token")
    print("Ctrl-C stops the cluster.", flush=True)
