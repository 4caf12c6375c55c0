"""`SimCluster`: the embedded Kubernetes API server as tests and the demo use it.

Wires store, registry, operations, controllers and the HTTP server together and offers the admin
helpers (apply, get, list, settle, faults), the test controls a real cluster has no API for
(trigger_cronjob, finish_pod), and, in RBAC mode, the tokens. Nothing here talks to a real cluster.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reactor_sim import cronjobs, kubeconfig, manifests, rbac, scheduler, serviceaccounts
from reactor_sim.authn import MASTERS, Tokens, make_user
from reactor_sim.controllers import Controllers
from reactor_sim.faults import Fault, Faults
from reactor_sim.history import DEFAULT_CAPACITY
from reactor_sim.objects import Clock
from reactor_sim.operations import Api
from reactor_sim.registry import Registry, Resource
from reactor_sim.server import Context, SimHTTPServer
from reactor_sim.status import ApiError
from reactor_sim.store import Store
from reactor_sim.tls import Certificate
from reactor_sim.versions import NEWEST, KubeVersion

Obj = dict[str, Any]
APPLY_ORDER = ("Namespace", "CustomResourceDefinition", "PriorityClass", "Node", "LimitRange", "ResourceQuota")
ADMIN_USER = "admin"
SHUTDOWN_POLL = 0.01  # seconds: how long stop() may wait for the serving loop to notice
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000))


APPLIED_BY = "kubectl-client-side-apply"  # the field manager `kubectl apply` names (what `apply` stands for)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SimCluster:
    def __init__(self, rbac: bool = False, *, clock: Clock | None = None, seed: int = 0,
                 watch_history: int = DEFAULT_CAPACITY, kube_version: str | KubeVersion = NEWEST,
                 feature_gates: dict[str, bool] | None = None) -> None:
        """`rbac=True`: every request needs a bearer token (`add_token`; anonymous requests are 401, as with
        `--anonymous-auth=false`) and RBAC decides it. The admin token (`admin_token`, group system:masters)
        is what `write_kubeconfig` writes by default. Admin helpers (`apply`, `get`, ...) bypass both.
        `watch_history`: changes kept per resource for watches to resume from (older ones are 410 Expired).
        `kube_version`: the release played (`1.28`, `1.32`, `1.33`, `1.35`; default the newest modelled): its
        /version, discovery, subresources and validation (versions.py); another is a ValueError. `feature_gates`:
        as kube-apiserver's and the kubelet's `--feature-gates` (only InPlacePodVerticalScaling is modelled)."""
        self.rbac = rbac
        self.version = kube_version if isinstance(kube_version, KubeVersion) else KubeVersion.parse(kube_version)
        for gate, enabled in (feature_gates or {}).items():
            self.version = self.version.with_gate(gate, enabled)
        self.registry = Registry(self.version)
        self.store = Store(watch_history)
        self.api = Api(self.store, self.registry, clock or _utcnow, seed=seed)
        self.faults = Faults()
        self.tokens = Tokens() if rbac else None
        self.admin_token = secrets.token_hex(16) if rbac else None
        self._ctx = Context(self.api, self.faults, self.tokens)
        self.controllers = Controllers(self.api)
        self._server: SimHTTPServer | None = None
        self._tls: Certificate | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._bootstrap()

    def _bootstrap(self) -> None:
        for ns in BUILTIN_NAMESPACES:
            self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for name, value in SYSTEM_PRIORITY_CLASSES:
            self.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                        "value": value, "description": "Used for system critical pods that must not be moved "
                        "from their current node.", "preemptionPolicy": "PreemptLowerPriority"})
        if self.tokens is not None and self.admin_token is not None:
            self.apply(rbac.bootstrap_policy())
            self.tokens.add(self.admin_token, make_user(ADMIN_USER, (MASTERS,)))

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0, *, tls: bool = False) -> SimCluster:
        """Serve on host:port (0: any free port). `tls`: https with a self-signed certificate (`ca_file`;
        `write_kubeconfig` embeds it), which kubectl needs before it sends a token."""
        self._ctx.stopping.clear()
        self._server = SimHTTPServer((host, port), self._ctx)
        if tls:
            self._tls = self._tls or Certificate()
            # The handshake happens in the handler's thread, on first read, not in the accepting loop.
            self._server.socket = self._tls.server_context().wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False)
        thread = threading.Thread(target=self._server.serve_forever, args=(SHUTDOWN_POLL,), name="sim-apiserver",
                                  daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not started")
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"{'https' if self._tls else 'http'}://{host}:{port}"

    @property
    def ca_file(self) -> str | None:
        """The CA (the self-signed certificate itself) to trust with `start(tls=True)`; else None."""
        return str(self._tls.cert_file) if self._tls else None

    def stop(self) -> None:
        self._stop.set()
        self._ctx.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        if self._tls is not None:
            self._tls.cleanup()
            self._tls = None

    def __enter__(self) -> SimCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- admin helpers ----------------------------------------------------------------------------

    def _resource_for(self, obj: Obj) -> Resource:
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        res = self.registry.by_kind(api_version, kind)
        if res is None:
            namespaced = bool((obj.get("metadata") or {}).get("namespace"))
            res = self.registry.add_generic(api_version, kind, namespaced=namespaced)
        return res

    def apply(self, obj: Obj | list[Obj]) -> Any:
        """Create or replace as an admin, through the same defaulting/admission/validation as the API."""
        if isinstance(obj, list):
            ordered = sorted(obj, key=lambda o: APPLY_ORDER.index(o.get("kind")) if o.get("kind") in APPLY_ORDER
                             else len(APPLY_ORDER))
            return [self.apply(o) for o in ordered]
        res = self._resource_for(obj)
        meta = obj.get("metadata") or {}
        ns = (meta.get("namespace") or "default") if res.namespaced else None
        with self.store.lock:
            if meta.get("name") and self.store.exists(res.plural, ns, meta["name"]):
                body = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
                return self.api.update(res, ns, meta["name"], body, manager=APPLIED_BY)
            return self.api.create(res, ns, obj, manager=APPLIED_BY)

    def load_manifests(self, text_or_path: str | Path) -> list[Obj]:
        """Apply every document of a multi-document YAML string or file (a `List` is unpacked), or every
        object under a folder (a kustomize entry point is rendered first: see `manifests.read`)."""
        text = str(text_or_path)
        if isinstance(text_or_path, Path) or ("\n" not in text and text.strip() and Path(text).exists()):
            return self.apply(manifests.read(Path(text)))
        return self.apply(manifests.parse(text))

    def get(self, resource: str, namespace: str | None, name: str) -> Obj:
        res = self.registry.by_plural(resource)
        with self.store.lock:
            return self.api.get(res, namespace, name)

    def list(self, resource: str, namespace: str | None = None, label_selector: str | None = None) -> list[Obj]:
        res = self.registry.by_plural(resource)
        with self.store.lock:
            return self.api.list(res, namespace, label_selector)[0]

    def delete(self, resource: str, namespace: str | None, name: str) -> None:
        res = self.registry.by_plural(resource)
        with self.store.lock:
            self.api.delete(res, namespace, name)

    # -- controllers ------------------------------------------------------------------------------

    def settle(self, max_rounds: int = 100) -> None:
        """Run every controller until a round changes nothing; raises if that takes too many rounds."""
        for _ in range(max_rounds):
            with self.store.lock:
                before = self.store.resource_version
                self.controllers.run_once()
                if self.store.resource_version == before:
                    return
        raise RuntimeError(f"the simulated cluster did not settle within {max_rounds} rounds")

    def trigger_cronjob(self, namespace: str, name: str, at: datetime | None = None) -> Obj | None:
        """Start the run the CronJob's schedule would start at `at` (default: now): a Job `<name>-<minutes
        since the epoch>` from its jobTemplate, controlled by the CronJob. None when suspended, or when a
        run is still active under concurrencyPolicy Forbid (then a `JobAlreadyActive` Event)."""
        with self.store.lock:
            return cronjobs.trigger(self.api, namespace, name, at)

    def finish_pod(self, namespace: str, name: str, exit_code: int = 0) -> Obj:
        """Let a running pod's containers exit: Succeeded/Failed under restartPolicy Never (OnFailure:
        Succeeded on 0, else restarted), restarted in place under Always. Controllers react on `settle()`."""
        with self.store.lock:
            pod = self.api.get(self.registry.by_plural("pods"), namespace, name)
            return scheduler.finish(self.api, pod, exit_code)

    def run_controllers(self, interval: float = 0.2) -> Callable[[], None]:
        """Run every controller once each `interval`, in the background, as a cluster's controllers run; the
        function returned stops that loop (stopping the cluster stops it too)."""
        halted = threading.Event()

        def loop() -> None:
            while not self._stop.wait(interval) and not halted.is_set():
                with self.store.lock:
                    self.controllers.run_once()
        thread = threading.Thread(target=loop, name="sim-controllers", daemon=True)
        thread.start()
        self._threads.append(thread)

        def halt() -> None:
            halted.set()
            thread.join(max(1.0, 10 * interval))
        return halt

    # -- counters, faults, kubeconfig -------------------------------------------------------------

    @property
    def requests(self) -> Counter[tuple[str, str, str]]:
        """Every request received, by (verb, resource plural or path, subresource), refused or not."""
        return self._ctx.requests

    @property
    def denied(self) -> Counter[tuple[str, str, str]]:
        """The requests RBAC refused (403), by the same keys as `requests`."""
        return self._ctx.denied

    def set_bookmark_interval(self, seconds: float) -> None:
        """How often watches with allowWatchBookmarks get a BOOKMARK (default 1 s)."""
        self._ctx.bookmark_interval = seconds

    def reset_counters(self) -> None:
        with self._ctx.counter_lock:
            self._ctx.requests.clear()
            self._ctx.denied.clear()

    # -- authentication ---------------------------------------------------------------------------

    def add_token(self, token: str, *, user: str, groups: Iterable[str] = ()) -> None:
        """Let `token` authenticate as `user`. A `system:serviceaccount:NS:NAME` user also gets the
        ServiceAccount groups and is refused (401) while that ServiceAccount does not exist."""
        if self.tokens is None:
            raise RuntimeError("tokens need SimCluster(rbac=True): without RBAC every request is admitted")
        self.tokens.add(token, make_user(user, groups))

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600) -> str:
        """A TokenRequest token for the ServiceAccount, as `kubectl create token NAME -n NAMESPACE` gets it
        (404 ApiError if the account does not exist); it authenticates only with RBAC on."""
        body = {"spec": {"expirationSeconds": seconds}}
        with self.store.lock:
            answer = serviceaccounts.request_token(self.api, self.tokens, namespace, name, body)
        return str(answer["status"]["token"])

    def remove_token(self, token: str) -> None:
        if self.tokens is not None:
            self.tokens.remove(token)

    def inject_fault(self, *, verb: str | None = None, resource: str | None = None,
                     subresource: str | None = None, status: int = 500, count: int = 1,
                     retry_after: int | None = None, mode: str = "status", delay: float = 5.0) -> None:
        self.faults.add(Fault(verb, resource, subresource, status, count, retry_after, mode, delay))

    def clear_faults(self) -> None:
        self.faults.clear()

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> str:
        """A kubeconfig for this cluster; with RBAC on, the admin token unless another is given."""
        return kubeconfig.write(path, self.url, token or self.admin_token, ca_pem=self._tls.pem if self._tls else None)


__all__ = ["SimCluster", "ApiError"]
