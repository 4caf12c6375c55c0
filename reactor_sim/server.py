"""The HTTP front: kube-apiserver's REST protocol over `http.server`, dispatching to `Api`.

It parses requests, counts them, applies injected faults and writes JSON answers; all API
semantics live in `operations`. It must not keep any state of its own besides counters.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections import Counter
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reactor_sim import (
    access,
    discovery,
    impersonation,
    managed_fields,
    negotiation,
    paging,
    protobuf_objects,
    rbac,
    routing,
    tables,
    watch,
)
from reactor_sim.authn import Tokens, User
from reactor_sim.faults import Faults
from reactor_sim.operations import Api
from reactor_sim.patch import JSON_PATCH, MERGE, STRATEGIC
from reactor_sim.registry import Resource
from reactor_sim.status import ApiError, bad_request, method_not_allowed, path_not_found, unsupported_media_type

Obj = dict[str, Any]
PATCH_TYPES = (STRATEGIC, MERGE, JSON_PATCH)
log = logging.getLogger(__name__)
WATCH_POLL = 0.25  # seconds: how often an idle watch stream looks at its deadline and the stop flag
BOOKMARK_INTERVAL = 1.0  # seconds between BOOKMARKs (upstream: about a minute; short so tests see them)
LIST_KINDS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Context:
    """What the request handlers share: the API, the lock, counters, faults, and the tokens when
    authentication and RBAC are on (None: every request is served, as an admin's would be)."""

    def __init__(self, api: Api, faults: Faults, tokens: Tokens | None = None) -> None:
        self.api, self.faults, self.tokens = api, faults, tokens
        self.requests: Counter[tuple[str, str, str]] = Counter()
        self.denied: Counter[tuple[str, str, str]] = Counter()
        self.counter_lock = threading.Lock()
        self.stopping = threading.Event()  # set on stop: open watch streams end
        self.bookmark_interval = BOOKMARK_INTERVAL

    def count(self, key: tuple[str, str, str], *, denied: bool = False) -> None:
        with self.counter_lock:
            (self.denied if denied else self.requests)[key] += 1

    def admit(self, headers: Message, method: str, path: str,
              query: dict[str, str]) -> tuple[User | None, ApiError | None]:
        """Authentication, impersonation, then authorization, before the server even looks the resource up:
        (the user, None) to go on, (None, the error) to refuse; (None, None) without RBAC."""
        if self.tokens is None:
            return None, None
        with self.api.store.lock:
            user = self.tokens.authenticate(headers.get("Authorization"), self.api.store, self.api.clock())
            if user is None:
                return None, rbac.unauthorized()
            names = list(headers.keys())
            if impersonation.requested(names):
                try:
                    user = impersonation.impersonate(self.api.store, user, lambda n: headers.get_all(n) or [], names)
                except ApiError as e:
                    return None, e
            info = routing.request_info(method, path, query)
            allowed, reason = rbac.authorize(self.api.store, user, info)
        return (user, None) if allowed else (None, rbac.forbidden(user, info, reason))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # kube-apiserver (Go) sets TCP_NODELAY: without it, headers and body written in two sends wait
    # ~40 ms for the client's delayed ACK on every keep-alive request.
    disable_nagle_algorithm = True
    server: SimHTTPServer
    _form: tuple[str, str] | None = None  # the form the open watch sends its objects in (negotiation.py)
    _include = ""  # a Table watch's includeObject (tables.py)
    _watched: Resource | None = None
    _headers_sent = False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass

    def setup(self) -> None:
        self.handshake_failed = False
        if isinstance(self.request, ssl.SSLSocket):
            try:
                self.request.settimeout(10)
                self.request.do_handshake()  # here, in the connection's thread (see SimCluster.start)
                self.request.settimeout(None)
            except OSError as e:  # ssl.SSLError too
                # A client that does not trust our CA (curl, a probe) or hangs up mid-handshake: a normal event,
                # which socketserver would otherwise print as a traceback.
                log.debug("TLS handshake failed", extra={"client": self.client_address[0], "error": str(e)})
                self.handshake_failed = True
        super().setup()

    def handle(self) -> None:
        if not self.handshake_failed:
            super().handle()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        ctx = self.server.ctx
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body, content_type = protobuf_objects.transcode(self._read_body(), self.headers.get("Content-Type", ""))
        route = routing.parse(ctx.api.registry, url.path)
        if route is None:
            key = (LIST_KINDS.get(method, method.lower()), url.path, "")
        else:
            verb = _verb(method, route, query)
            key = (verb, route.resource.plural, route.subresource)
        ctx.count(key)
        user, denial = ctx.admit(self.headers, method, url.path, query)
        if denial is not None:
            if denial.code == 403:
                ctx.count(key, denied=True)
            self._send(denial.code, denial.body(), denial.headers)
            return
        if route is None:
            self._answer_nonresource(method, url.path)
            return
        fault = ctx.faults.take(verb, route.resource.plural, route.subresource)
        if fault is not None and self._apply_fault(fault):
            return
        if verb not in route.resource.verbs:
            err = method_not_allowed()
            self._send(err.code, err.body())
            return
        if access.handles(route):
            self._answer_access(route, user, body, content_type)
            return
        try:
            # negotiate.go NegotiateOutputMediaType runs before the read: a form it cannot give is a 406 first.
            form = negotiation.target(self.headers.get("Accept"), table=not route.subresource) \
                if verb in ("get", "list", "watch") else None
            include = tables.include_object(query) if form is not None and form[0] == negotiation.TABLE else ""
            if verb == "watch" and not route.subresource:
                self._include = include
                self._stream_watch(watch.options(route.resource, route.namespace, query), form)
                return
            with ctx.api.store.lock:
                manager = managed_fields.manager_of(query.get("fieldManager"), self.headers.get("User-Agent"))
                code, answer = dispatch(ctx.api, method, verb, route, query, body, content_type, manager)
            if form is not None and code == 200 and form[0] == negotiation.TABLE:
                answer = tables.convert(answer, route.resource, ctx.api.registry, form[1], include, ctx.api.clock(),
                                        is_list=verb == "list")
            elif form is not None and code == 200:
                answer = negotiation.convert(answer, form, is_list=verb == "list")
        except ApiError as e:
            self._send(e.code, e.body(), e.headers)
            return
        self._send(code, answer)

    def _answer_access(self, route: routing.Route, user: User | None, body: bytes, content_type: str) -> None:
        """`body` as transcoded by `protobuf_objects` (JSON where it knows the kind; the raw protobuf otherwise)."""
        ctx = self.server.ctx
        try:
            with ctx.api.store.lock:
                code, answer = access.answer(ctx.api, ctx.tokens, route, user, body, content_type)
        except ApiError as e:
            self._send(e.code, e.body(), e.headers)
            return
        self._send(code, answer)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _apply_fault(self, fault: Any) -> bool:
        if fault.mode == "status":
            from reactor_sim.status import for_code
            err = for_code(fault.status, retry_after=fault.retry_after)
            self._send(err.code, err.body(), err.headers)
            return True
        if fault.mode == "timeout":
            time.sleep(fault.delay)
        self.close_connection = True
        return True

    def _answer_nonresource(self, method: str, path: str) -> None:
        host, port = self.server.server_address[:2]
        doc = nonresource(self.server.ctx.api, path, f"{host!s}:{port}")
        if doc is None:
            err = path_not_found()
            self._send(err.code, err.body())
        elif method != "GET":
            err = method_not_allowed()
            self._send(err.code, err.body())
        else:
            self._send(200, doc)

    def _send(self, code: int, body: Obj, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream_watch(self, opts: watch.Options, form: tuple[str, str] | None = None) -> None:
        """A watch: newline-delimited WatchEvents in chunks of one 200 response, until timeoutSeconds,
        the client leaves or the server stops (then a clean end of the chunked body). With `form`
        (PartialObjectMetadata), each event's object is sent as its metadata only (negotiation.py); as a Table,
        each event's object is a one-row Table, the column definitions on the first only (apiserver
        handlers/watch.go: the table options get NoHeaders after the first object)."""
        if form is not None and form[0] not in (negotiation.PARTIAL, negotiation.TABLE):
            raise negotiation.not_acceptable(f"you requested {form[0]}, but the requested object is not a list "
                                              f"(*v1.{opts.resource.kind})")
        self._form = form
        self._watched = opts.resource
        self._headers_sent = False
        store = self.server.ctx.api.store
        with store.lock:
            events, cursor = watch.begin(store, opts)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._write_events(events)
            if cursor is not None:
                self._follow(opts, cursor, time.monotonic() + opts.timeout)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    def _follow(self, opts: watch.Options, cursor: int, deadline: float) -> None:
        store, ctx = self.server.ctx.api.store, self.server.ctx
        next_bookmark = time.monotonic() + ctx.bookmark_interval
        while not ctx.stopping.is_set() and (now := time.monotonic()) < deadline:
            with store.changed:
                if store.resource_version == cursor:
                    store.changed.wait(max(0.0, min(deadline, next_bookmark, now + WATCH_POLL) - now))
                events, cursor = watch.events_after(store, opts, cursor)
            if opts.bookmarks and time.monotonic() >= next_bookmark:
                events.append(watch.bookmark(opts.resource, cursor))
                next_bookmark = time.monotonic() + ctx.bookmark_interval
            self._write_events(events)

    def _table_event(self, event: Obj, api_version: str) -> Obj:
        if event.get("type") == "ERROR" or not isinstance(event.get("object"), dict):
            return event
        ctx = self.server.ctx
        assert self._watched is not None  # set by _stream_watch before any event is written
        table = tables.convert(event["object"], self._watched, ctx.api.registry, api_version, self._include,
                               ctx.api.clock(), is_list=False, headers=not self._headers_sent)
        self._headers_sent = True
        return {**event, "object": table}

    def _write_events(self, events: list[Obj]) -> None:
        form = self._form
        for event in events:
            if form is not None and form[0] == negotiation.TABLE:
                event = self._table_event(event, form[1])
            elif form is not None:
                event = negotiation.event(event, form)
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _verb(method: str, route: routing.Route, query: dict[str, str]) -> str:
    if method == "GET" and route.name is None:
        return "watch" if watch.is_watch(query) else "list"
    if method == "DELETE" and route.name is None:
        return "deletecollection"
    return LIST_KINDS.get(method, method.lower())


def nonresource(api: Api, path: str, address: str) -> Obj | None:
    path = path.rstrip("/") or "/"
    if path == "/version":
        return discovery.version_info(api.registry)
    if path == "/api":
        return discovery.api_versions(address)
    if path == "/apis":
        return discovery.api_group_list(api.registry)
    if path in ("/healthz", "/readyz", "/livez"):
        return {"status": "ok"}
    prefix = routing.split_prefix(path)
    if prefix is not None and not prefix[2]:
        return discovery.api_resource_list(api.registry, prefix[0], prefix[1])
    parts = [p for p in path.split("/") if p]
    if len(parts) == 2 and parts[0] == "apis":
        return discovery.api_group(api.registry, parts[1])
    return None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as e:
        raise bad_request(f"couldn't get version/kind; json parse error: {e}") from e


def dispatch(api: Api, method: str, verb: str, route: routing.Route, query: dict[str, str], body: bytes,
             content_type: str, manager: str = "") -> tuple[int, Obj]:
    res, ns, name, sub = route.resource, route.namespace, route.name, route.subresource
    dry_run = query.get("dryRun") == "All"
    if sub and verb not in ("get", "update", "patch"):
        raise method_not_allowed()  # subresources (status, scale, resize) serve get, update and patch only
    if verb == "list":
        items, rv = api.list(res, ns, query.get("labelSelector"), query.get("fieldSelector"), copies=False)
        items, list_meta = paging.page(items, rv, query, across_namespaces=res.namespaced and ns is None,
                                       filtered=bool(query.get("labelSelector") or query.get("fieldSelector")))
        return 200, {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": list_meta, "items": items}
    if verb == "create":
        return 201, api.create(res, ns, _json(body), dry_run=dry_run, manager=manager)
    if verb == "deletecollection":
        items, rv = api.list(res, ns, query.get("labelSelector"), query.get("fieldSelector"))
        for item in items:
            api.delete(res, item["metadata"].get("namespace"), item["metadata"]["name"])
        return 200, {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                     "metadata": {"resourceVersion": rv}, "items": items}
    assert name is not None
    if sub == "scale":
        return _scale(api, verb, route, body, content_type)
    if verb == "get":
        return 200, api.get(res, ns, name)
    if verb == "update":
        return 200, api.update(res, ns, name, _json(body), subresource=sub, dry_run=dry_run, manager=manager)
    if verb == "patch":
        ctype = content_type.split(";")[0].strip()
        custom = api.registry.schema_of(res) is not None
        if ctype not in PATCH_TYPES or (custom and ctype == STRATEGIC):
            raise unsupported_media_type(ctype, custom=custom)
        return 200, api.patch(res, ns, name, ctype, _json(body), subresource=sub, dry_run=dry_run,
                              manager=manager)
    if verb == "delete":
        return 200, api.delete(res, ns, name)
    raise method_not_allowed()


def _scale(api: Api, verb: str, route: routing.Route, body: bytes, content_type: str) -> tuple[int, Obj]:
    from reactor_sim import patch as patches

    res, ns, name = route.resource, route.namespace, route.name
    assert name is not None
    if verb == "get":
        return 200, api.get_scale(res, ns, name)
    if verb == "update":
        return 200, api.write_scale(res, ns, name, _json(body))
    if verb == "patch":
        ctype = content_type.split(";")[0].strip()
        if ctype not in PATCH_TYPES:
            raise unsupported_media_type(ctype)
        try:
            scale = patches.apply(ctype, api.get_scale(res, ns, name), _json(body))
        except patches.PatchError as e:
            from reactor_sim.status import generic_invalid
            raise generic_invalid() from e
        return 200, api.write_scale(res, ns, name, scale)
    raise method_not_allowed()


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], ctx: Context) -> None:
        super().__init__(address, Handler)
        self.ctx = ctx
