"""What `reactor serve` checks in gunicorn's master before any worker starts, importing none of the worker's modules.

The master only binds the sockets and watches its worker; the Flask app, the engine, the Kubernetes client and the
watch cache are imported and built in the worker (reactor/app/runner.py), so a pod's memory holds them once, not
in two processes. A configuration the worker would refuse is still refused here, as one line and exit status 2:
the token file, the state keys, and whether there is a cluster config to load (in-cluster, or a kubeconfig file
that parses). An API server that takes no connection is one line and exit status 1. The worker loads that config
with the Kubernetes client (reactor/cluster/kube/gateway.py `connect`); a kubeconfig that parses here but that the
client refuses stops the worker at boot, with its error logged.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from reactor.config.settings import Settings, require_confirm_url
from reactor.core.errors import ConfigError, TemporaryError
from reactor.intake.bearer import TokenFile
from reactor.state.seal import load_state_keys

CONNECT_SECONDS = 3.0  # how long the API server may take to accept the preflight's connection
# Where the Kubernetes client finds the in-cluster config (kubernetes/config/incluster_config.py).
SERVICE_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def check(settings: Settings) -> None:
    """Raise the ConfigError `assemble` would raise for the token file, the state keys or the cluster config, and
    TemporaryError when the API server that config names does not take a connection."""
    token_file(settings)
    load_state_keys(settings.server.state_key_file, settings.server.state_previous_key_file,
                    required=not settings.policy.dry_run, announce=False)
    cluster_config(settings)
    require_confirm_url(settings)
    api_server_reachable(settings)


def api_server_reachable(settings: Settings, timeout: float = CONNECT_SECONDS) -> None:
    """One TCP connection to the API server the cluster config names, before anything is started: a wrong server
    address or a cluster that is down is one line (exit 1), not a worker that fails to boot. Only the connection is
    tried — no TLS, no credentials, no Kubernetes client in this process; the worker's client does the rest, and a
    server that goes away later only makes the reactor not ready."""
    server = _server_address(settings)
    if server is None:
        return  # a config the client resolves some other way (an exec plugin's proxy, say): the worker will say
    host, port, url = server
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        why = f"no answer within {timeout:g}s" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise TemporaryError(f"cannot reach the Kubernetes API server at {url}: {why}; check the kubeconfig's "
                             "server (kube.kubeconfig, kube.context) or that the cluster is up") from None


def _server_address(settings: Settings) -> tuple[str, int, str] | None:
    """(host, port, URL) of the API server: in-cluster from the service environment, else the kubeconfig's context."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if host and port and SERVICE_TOKEN.is_file() and port.isdigit():
        return host, int(port), f"https://{host}:{port}"
    try:
        doc: Any = yaml.safe_load(Path(os.path.expanduser(_kubeconfig_path(settings))).read_text())
        wanted = settings.kube.context or doc.get("current-context")
        context = next(c["context"] for c in doc["contexts"] if c.get("name") == wanted)
        cluster = next(c["cluster"] for c in doc["clusters"] if c.get("name") == context["cluster"])
        if cluster.get("proxy-url"):
            return None  # the client connects through the proxy (kube_config.py `proxy-url`), never straight there
        url = urllib.parse.urlsplit(str(cluster["server"]))
        default = 443 if url.scheme == "https" else 80
        return (url.hostname or "", url.port or default, cluster["server"]) if url.hostname else None
    except (OSError, yaml.YAMLError, KeyError, StopIteration, TypeError, AttributeError, ValueError):
        return None  # what the client would make of it is the worker's to say


def _kubeconfig_path(settings: Settings) -> str:
    return settings.kube.kubeconfig or (os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")


def token_file(settings: Settings) -> TokenFile:
    if settings.server.token_file is None:
        raise ConfigError("server.tokenFile", "required: the webhook changes workloads and must be authenticated; "
                          "set it in the policy file or REACTOR_SERVER__TOKEN_FILE to a file holding the bearer token")
    try:
        return TokenFile(settings.server.token_file)
    except OSError as e:
        raise ConfigError("server.tokenFile", f"cannot read {settings.server.token_file}: {e.strerror}") from e


def cluster_config(settings: Settings) -> None:
    """In-cluster (the service host and the ServiceAccount token, as the client's `load_incluster_config` needs),
    else the kubeconfig the client would read (kube.kubeconfig, $KUBECONFIG's first file, ~/.kube/config): it must
    be a YAML mapping whose context (kube.context, else current-context) it defines."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT") \
            and SERVICE_TOKEN.is_file():
        return
    problem = _kubeconfig_problem(Path(os.path.expanduser(_kubeconfig_path(settings))), settings.kube.context)
    if problem:
        raise ConfigError("kube.kubeconfig", f"no in-cluster config and no usable kubeconfig: {problem}")


def _kubeconfig_problem(path: Path, context: str | None) -> str:
    try:
        doc: Any = yaml.safe_load(path.read_text())
    except OSError as e:
        return f"{path}: {e.strerror}"
    except yaml.YAMLError as e:
        return f"{path}: not YAML: {str(e).splitlines()[0]}"
    if not isinstance(doc, dict):
        return f"{path}: Invalid kube-config file. No configuration found."
    wanted = context or doc.get("current-context")
    names = {c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)}
    if not wanted:
        return f"{path}: Invalid kube-config file. Expected key current-context in kube-config"
    if wanted not in names:
        return f"{path}: Invalid kube-config file. Expected object with name {wanted} in contexts list"
    return ""
