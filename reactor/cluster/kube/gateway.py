"""The Kubernetes gateway: reads and writes the few objects the reactor needs, as plain dicts.

It speaks raw JSON (`_preload_content=False`) because the reactor reads a handful of fields
and the client's model deserialisation costs more than the request. Every call goes through
a client-side rate limit (QPS, burst) so an alert storm cannot flood the API server, and through
bounded retries for 429/5xx/timeouts that honour `Retry-After`. `ApiException`s become the
reactor's own errors, typed by what the caller should do next (`failures.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from reactor.cluster.capabilities import UNKNOWN, Capabilities
from reactor.cluster.kube import routes
from reactor.cluster.kube.failures import NotFound, backoff, retry_after, translate
from reactor.cluster.kube.limiter import RateLimiter
from reactor.cluster.kube.rest import Rest
from reactor.cluster.kube.routes import ACCESS_REVIEWS, EVENTS, LEASES, MERGE, NAMESPACES, ROUTES, STRATEGIC
from reactor.cluster.kube.watches import WatchStreams
from reactor.cluster.metrics import ClusterMetrics
from reactor.config.settings import Kube
from reactor.core.errors import ConfigError, ReactorError, TemporaryError
from reactor.core.metrics import Metrics
from reactor.integrations.adapters import Adapter
from reactor.state.homes import OnLease, OnObject, Resource, StateHome

log = logging.getLogger(__name__)
LIST_PAGE = 500  # objects per list page (client-go's pager default, tools/pager/pager.go defaultPageSize)
IMPERSONATE = "Impersonate-User"  # kube-apiserver's impersonation header (`reactor doctor --as`)


class KubeGateway:
    """Reads and writes the few objects the reactor needs, as plain dicts."""

    def __init__(self, api_client: k8s.ApiClient, *, settings: Kube, metrics: Metrics, retries: int = 3) -> None:
        self._client = api_client
        self._rest = Rest(api_client)  # requests by path (rest.py): never the generated API classes
        self._timeout = settings.timeout.total_seconds()
        self._limiter = RateLimiter(settings.qps, settings.burst)
        self._counts = ClusterMetrics.of(metrics)  # what the cluster stage counts (cluster/metrics.py)
        self._retries = retries
        self._streams = WatchStreams()  # open watch responses, so `end_watches` can end them
        # What the server can do (capabilities.py): read on first use, and again after a reconnect.
        self._capabilities: Capabilities | None = None
        self._discovering = threading.Lock()
        # Where the reactor's record of an operator's resource lives (reactor/state/homes.py): each home talks back
        # through this gateway's verbs.
        self._object_home, self._lease_home = OnObject(self), OnLease(self)

    # --- construction -------------------------------------------------------------------

    @classmethod
    def connect(cls, settings: Kube, metrics: Metrics) -> KubeGateway:
        """In-cluster config when running in a pod, else the kubeconfig (file or default)."""
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            try:
                k8s_config.load_kube_config(
                    config_file=settings.kubeconfig, context=settings.context, client_configuration=configuration
                )
            except (k8s_config.ConfigException, yaml.YAMLError, OSError) as e:
                problem = str(e).replace("\n", " ")
                raise ConfigError("kube.kubeconfig", f"no in-cluster config and no usable kubeconfig: {problem}") from e
        return cls(_api_client(configuration, settings), settings=settings, metrics=metrics)

    @classmethod
    def for_url(cls, url: str, settings: Kube, metrics: Metrics, *, token: str | None = None) -> KubeGateway:
        """A gateway to an API server at `url` (the embedded cluster, in the demo and tests)."""
        configuration = k8s.Configuration(host=url)
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return cls(_api_client(configuration, settings), settings=settings, metrics=metrics)

    def close(self) -> None:
        self._client.close()

    # --- calls ----------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str, adapter: Adapter | None = None) -> dict[str, Any]:
        """A built-in object by kind; an operator's resource through the `adapter` the caller enabled for it."""
        if adapter is not None and kind not in ROUTES:
            return self._get_custom(adapter, namespace, name)
        route = routes.route(kind)
        return self._call("get", route.resource, self._rest.send("GET", route.item(namespace, name)))

    def list_objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        route = ROUTES[kind]
        send = self._rest.send("GET", route.collection(namespace))
        return self._call("list", route.resource, send).get("items") or []

    def list_priority_classes(self) -> list[dict[str, Any]]:
        route = routes.PRIORITY_CLASSES
        return self._call("list", route.resource, self._rest.send("GET", route.collection())).get("items") or []

    def list_page(self, kind: str, namespace: str, *,
                  decode: Callable[[bytes], Any] | None = None) -> tuple[Iterator[Any], str]:
        """Every object of a kind in a namespace ("" = all namespaces) and the list's resourceVersion.

        Read in pages of `LIST_PAGE` (`limit` and `continue`, as client-go's pager does), the pages after the first
        as the objects are consumed: at 100,000 objects one response would be hundreds of MB of JSON and parsed
        dicts at once, and the worker's memory would keep that peak. A continue token that expired (410) raises
        `Expired` from the iteration: the caller lists again. `decode`: how each page's bytes are decoded (the watch
        cache trims its objects as it decodes them, reactor/cluster/trim.py `decode_page`); JSON by default.
        """
        route = routes.listed(kind)
        page = [("limit", str(LIST_PAGE))]
        answer = self._call("list", route.resource, self._rest.send("GET", route.collection(namespace), query=page),
                            decode=decode)
        return (self._rest_of(route, namespace, answer, decode),
                str((answer.get("metadata") or {}).get("resourceVersion") or ""))

    def _rest_of(self, route: routes.Route, namespace: str, answer: dict[str, Any],
                 decode: Callable[[bytes], Any] | None) -> Iterator[Any]:
        while True:
            yield from answer.pop("items", None) or []
            token = (answer.get("metadata") or {}).get("continue")
            if not token:
                return
            query = [("limit", str(LIST_PAGE)), ("continue", str(token))]
            send = self._rest.send("GET", route.collection(namespace), query=query)
            answer = self._call("list", route.resource, send, decode=decode)

    def watch_events(self, kind: str, namespace: str, version: str, seconds: int) -> Iterator[dict[str, Any]]:
        """The watch events after `version` (BOOKMARKs asked for), until the server ends the stream.

        A 410 at the start raises `Expired`; an ERROR event in the stream is yielded as it came.
        """
        route = routes.listed(kind)
        query = [("watch", "true"), ("resourceVersion", version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(seconds))]
        send = self._rest.send("GET", route.collection(namespace), query=query)
        response = self._open("watch", route.resource, send, seconds + self._timeout)
        try:
            yield from self._streams.events(response, route.resource)
        except TemporaryError:
            self.forget_capabilities()  # a broken stream: the informer reconnects, perhaps to another release
            raise

    def end_watches(self) -> None:
        """End every open watch stream now, from any thread (a blocked read returns; the informer sees its stop)."""
        self._streams.end_all()

    def _open(self, verb: str, resource: str, send: Callable[..., Any], read_timeout: float) -> Any:
        """Start a streamed request (one attempt; the informer owns the retries): the raw response."""
        self._limiter.acquire()
        try:
            response = send(_preload_content=False, _request_timeout=(self._timeout, read_timeout))
        except ApiException as e:
            self._count(verb, resource, str(e.status))
            raise translate(e, verb, resource) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            self._count(verb, resource, "error")
            self.forget_capabilities()
            raise TemporaryError(f"{verb} {resource}: {type(e).__name__}: {e}") from e
        self._count(verb, resource, str(getattr(response, "status", 200)))
        return response

    def patch(self, kind: str, namespace: str, name: str, body: dict[str, Any],
              adapter: Adapter | None = None) -> dict[str, Any]:
        """Strategic merge patch (JSON merge patch for an operator's resource, given its `adapter`); a
        `metadata.resourceVersion` in `body` makes it conditional (409 if stale)."""
        if adapter is not None and kind not in ROUTES:
            return self._patch_custom(adapter, namespace, name, body)
        route = routes.route(kind)
        return self._call("patch", route.resource,
                          self._rest.send("PATCH", route.item(namespace, name), body=body, content_type=STRATEGIC))

    def resize_pod(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Strategic merge patch of pods/NAME/resize (in-place CPU/memory resize, Kubernetes 1.33+)."""
        path = ROUTES["Pod"].item(namespace, name) + "/resize"
        return self._call("patch", "pods/resize", self._rest.send("PATCH", path, body=body, content_type=STRATEGIC))

    def home(self, adapter: Adapter) -> StateHome:
        """Where the reactor's record of an operator's resource lives (reactor/state/homes.py): on a Lease beside it
        where the adapter says its operator copies annotations into the pods, else on the resource."""
        return self._lease_home if adapter.state_apart else self._object_home

    def _get_custom(self, adapter: Adapter, namespace: str, name: str) -> dict[str, Any]:
        return self.home(adapter).fetch(adapter, self.read_custom(adapter, namespace, name))

    def _patch_custom(self, adapter: Adapter, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.home(adapter).store(adapter, namespace, name, body)

    def read_custom(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        """An operator's resource as the API server holds it."""
        path = routes.custom(resource.group, resource.version, resource.plural).item(namespace, name)
        return self._call("get", resource.plural, self._rest.send("GET", path))

    def merge_custom(self, resource: Resource, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of an operator's resource (custom resources take no strategic merge)."""
        path = routes.custom(resource.group, resource.version, resource.plural).item(namespace, name)
        return self._call("patch", resource.plural, self._rest.send("PATCH", path, body=body, content_type=MERGE))

    def get_custom(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        """A custom object by name (cluster-scoped when `namespace` is None), e.g. Kueue's queues."""
        path = routes.custom(group, version, plural).item(namespace or "", name)
        return self._call("get", plural, self._rest.send("GET", path))

    def list_cluster_custom(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        path = routes.custom(group, version, plural).collection()
        return self._call("list", plural, self._rest.send("GET", path)).get("items") or []

    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """The Event as created (its generated name: a repeat is counted on it, see act/posting.py)."""
        return self._call("create", "events", self._rest.send("POST", EVENTS.collection(namespace), body=body))

    def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A repeat counted on an earlier Event (strategic merge of count, lastTimestamp, message), as client-go's
        recorder does (tools/record/event.go recordToSink)."""
        return self._call("patch", "events",
                          self._rest.send("PATCH", EVENTS.item(namespace, name), body=body, content_type=STRATEGIC))

    # --- the verifier's Lease (coordination.k8s.io): every update carries the resourceVersion it read -----

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call("get", "leases", self._rest.send("GET", LEASES.item(namespace, name)))

    def find_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease, or None when there is none (404)."""
        try:
            return self.get_lease(namespace, name)
        except NotFound:
            return None

    def merge_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """A JSON merge patch of a Lease (a `metadata.resourceVersion` in `body` makes it conditional); None when
        the Lease does not exist (404)."""
        try:
            return self._call("patch", "leases",
                              self._rest.send("PATCH", LEASES.item(namespace, name), body=body, content_type=MERGE))
        except NotFound:
            return None

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST the Lease as the JSON given (see `update_lease`: the client's V1Lease would rewrite its times)."""
        return self._call("create", "leases", self._rest.send("POST", LEASES.collection(namespace), body=body))

    def update_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT with `metadata.resourceVersion` (a Lease update without one is a 422): a 409 if it moved on."""
        if not (body.get("metadata") or {}).get("resourceVersion"):
            raise ValueError("a Lease update must carry the resourceVersion it was read at")
        return self._call("update", "leases", self._rest.send("PUT", LEASES.item(namespace, name), body=body))

    # The Lease goes as the JSON given, never through the generated `replace_namespaced_lease`: it would first
    # validate the dict into the client's model (pydantic V1Lease) and serialise that, and every MicroTime would
    # become a `datetime` written by `isoformat()`, which drops the fraction at a whole second
    # (`2026-03-01T12:00:00+00:00`), while kube-apiserver decodes MicroTime with RFC3339Micro only (apimachinery
    # meta/v1 micro_time.go): a 400 for any Lease time at a whole second. The model would also refuse a field it
    # does not know (a newer server's) instead of sending it back. rest.py sends every body as it is.

    def access_review(self, *, verb: str, group: str, resource: str, namespace: str = "", name: str = "") -> bool:
        """A SelfSubjectAccessReview (`kubectl auth can-i`): may this client, or whom it impersonates, do it?"""
        attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace, "name": name}
        body: Any = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                     "spec": {"resourceAttributes": attributes}}
        send = self._rest.send("POST", ACCESS_REVIEWS.collection(), body=body)
        return bool((self._call("create", ACCESS_REVIEWS.resource, send).get("status") or {}).get("allowed"))

    def namespace_exists(self, name: str) -> bool | None:
        """Whether the Namespace exists, asked with this client's own credentials (not whom it impersonates: the
        reactor's ServiceAccount may not read Namespaces); None when this client may not read it either."""
        try:
            self._call("get", "namespaces", self._rest.send("GET", NAMESPACES.item("", name), unsent=(IMPERSONATE,)),
                       retries=0)
        except NotFound:
            return False
        except ReactorError:
            return None
        return True

    def impersonate(self, user: str) -> None:
        """Send every later request as `user` (Impersonate-User); the caller needs the `impersonate` verb."""
        self._client.set_default_header(IMPERSONATE, user)

    def version(self) -> dict[str, Any]:
        return self._call("get", "version", self._rest.send("GET", "/version/"), retries=0)

    # --- what the server can do ------------------------------------------------------------

    def discover(self) -> Capabilities:
        """Ask the server now: `/version` and the core group's discovery (`/api/v1`), remembered until a
        reconnect or `forget_capabilities`. A server that does not answer raises (TemporaryError)."""
        version = self._call("get", "version", self._rest.send("GET", "/version/"))
        core = self._call("get", "discovery", self._rest.send("GET", "/api/v1/"))
        found = Capabilities.from_discovery(version, core)
        with self._discovering:
            self._capabilities = found
        log.info("kube-apiserver capabilities", extra={"version": found.version,
                                                       "inPlaceResize": found.in_place_resize,
                                                       "sidecars": found.sidecars})
        return found

    def capabilities(self) -> Capabilities:
        """What the server can do, as last discovered; discovered now when not known (first use, after a
        reconnect). Discovery refused or unanswered: UNKNOWN (nothing taken as served), asked again next time."""
        with self._discovering:
            known = self._capabilities
        if known is not None:
            return known
        try:
            return self.discover()
        except ReactorError as e:
            log.warning("kube-apiserver discovery failed", extra={"error": str(e)})
            return UNKNOWN

    def forget_capabilities(self) -> None:
        """The server answered as the capabilities did not say (a subresource it no longer serves): ask again."""
        with self._discovering:
            self._capabilities = None

    # --- the one place requests are sent ---------------------------------------------------

    def _call(self, verb: str, resource: str, send: Callable[..., Any], *, retries: int | None = None,
              decode: Callable[[bytes], Any] | None = None) -> Any:
        attempts = (self._retries if retries is None else retries) + 1
        for attempt in range(attempts):
            self._limiter.acquire()
            try:
                response = send(_preload_content=False, _request_timeout=self._timeout)
                # The status the server sent (201 for a create), not an assumed 200.
                self._count(verb, resource, str(getattr(response, "status", 200)))
                return (decode or json.loads)(response.data or b"{}")
            except ApiException as e:
                self._count(verb, resource, str(e.status))
                cause: BaseException = e
                error = translate(e, verb, resource)
                delay = retry_after(e, attempt)
            except (urllib3.exceptions.HTTPError, OSError) as e:
                self._count(verb, resource, "error")
                cause = e
                error = TemporaryError(f"{verb} {resource}: {type(e).__name__}: {e}")
                delay = backoff(attempt)
                self.forget_capabilities()  # the connection broke: the server met on reconnect may be another release
            except ValueError as e:
                # An answer cut short or not JSON at all (a proxy's error page): as a dropped connection, never a
                # ValueError reaching the engine, where it would read as the workload's own data (internal-error).
                cause = e
                error = TemporaryError(f"{verb} {resource}: the answer is not JSON: {e}")
                delay = backoff(attempt)
            if not isinstance(error, TemporaryError) or attempt + 1 == attempts:
                raise error from cause
            log.info(
                "kube request retried", extra={"verb": verb, "resource": resource, "error": str(error), "delay": delay}
            )
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _count(self, verb: str, resource: str, code: str) -> None:
        self._counts.kube_requests.labels(verb=verb, resource=resource, code=code).inc()


def _api_client(configuration: k8s.Configuration, settings: Kube) -> k8s.ApiClient:
    # Retries are ours (bounded, rate limited, Retry-After aware); urllib3 must not add its own.
    configuration.retries = False
    configuration.connection_pool_maxsize = max(4, settings.burst)
    api_client = k8s.ApiClient(configuration)
    api_client.user_agent = "gpu-reactor"
    return api_client


