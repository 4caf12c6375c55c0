"""Where the reactor keeps its record of a resource: one protocol, two homes (kopf's ProgressStorage family is the
model: `AnnotationsProgressStorage` and its siblings behind fetch and store).

`OnObject`: the record is annotations of the object itself, written in the same request as the change it records
(a conditional patch: the change and its record land together or not at all). `OnLease`: the record lives on a
Lease `<resource>.gpu-reactor` beside the resource (lease_home.py says why: KServe copies an InferenceService's
annotations into its pods). Only a home reads or writes the reactor's keys where the record lives; every caller
hands it the object as read (`fetch`) or the patch body carrying the record in `metadata.annotations` (`store`).

The API calls go through `HomeApi`, a narrow protocol declared here: this layer sits below the cluster gateway
(import-linter's layers in pyproject.toml), and the gateway satisfies it structurally. Which home a kind uses is
the adapter's to say (the gateway picks it). There is no `purge`: the reactor never forgets a record on purpose (a
revert writes a record of its own); a record someone else removed is the state ledger's business.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Any, Protocol

from reactor.core.errors import ConflictError, PermanentError
from reactor.state import lease_home

Obj = dict[str, Any]


class Resource(Protocol):
    """An operator's kind as the API serves it (an adapter satisfies it)."""

    @property
    def kind(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...


class HomeApi(Protocol):
    """The API verbs a home needs; reactor/cluster/kube/gateway.py `KubeGateway` has each of them."""

    def read_custom(self, resource: Resource, namespace: str, name: str) -> Obj: ...
    def merge_custom(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj: ...
    def find_lease(self, namespace: str, name: str) -> Obj | None: ...
    def create_lease(self, namespace: str, body: Obj) -> Obj: ...
    def merge_lease(self, namespace: str, name: str, body: Obj) -> Obj | None: ...


class StateHome(Protocol):
    def fetch(self, resource: Resource, obj: Obj) -> Obj:
        """The object as the reactor reads it: with its record in `metadata.annotations`, wherever it lives."""

    def store(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj:
        """Send `body` (a change, its record, or the record alone), conditional on its `metadata.resourceVersion`;
        the object as `fetch` would read it afterwards."""


class OnObject:
    """The record on the object itself: nothing to add on a read, the patch sent as it is."""

    def __init__(self, api: HomeApi) -> None:
        self.api = api

    def fetch(self, resource: Resource, obj: Obj) -> Obj:
        return obj

    def store(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj:
        return self.api.merge_custom(resource, namespace, name, body)


class OnLease:
    """The record on the resource's state Lease. The Lease is created before the resource changes (a refused create
    writes nothing); the resource's spec is then written (conditional on its resourceVersion: it holds the turn),
    then the record; the record alone (the verified mark) is conditional on the Lease's resourceVersion as read."""

    def __init__(self, api: HomeApi) -> None:
        self.api = api
        self._versions = _Versions()  # (namespace, name, resource version) → its state Lease's version as read

    def fetch(self, resource: Resource, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        home = self.api.find_lease(namespace, lease_home.home_name(name))
        # The Lease's version whoever wrote it: a write from this read takes over a Lease it did not make (a namesake,
        # a tenant's look-alike) conditionally, rather than failing to create one that exists.
        self._versions.remember((namespace, name, str(meta.get("resourceVersion", ""))), _version_of(home))
        return lease_home.merged(obj, home)

    def store(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj:
        own, rest = lease_home.split(body)
        if not own:
            self.api.merge_custom(resource, namespace, name, rest)
            return self.fetch(resource, self.api.read_custom(resource, namespace, name))
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if lease_home.writes_resource(rest):
            # The Lease exists before the resource changes, so a refused create writes nothing at all; the
            # resource's write holds the turn (conditional on its version) and the state follows it.
            self._ensure(resource, namespace, name, version)
            written = self.api.merge_custom(resource, namespace, name, rest)
            try:
                home = self._write(namespace, written, own, None)
            except PermanentError as e:
                raise PermanentError(f"{resource.kind} {name} was changed but the record of it was refused: {e}",
                                     status=e.status, reason=e.reason) from e
            return lease_home.merged(written, home)
        # The state alone (the verifier's mark): the resource must still be the one read, and the Lease too.
        current = self.api.read_custom(resource, namespace, name)
        found = str((current.get("metadata") or {}).get("resourceVersion", ""))
        if version and found != version:
            raise ConflictError(f"patch {resource.plural}: {name} changed since it was read ({version} → {found})")
        home = self._write(namespace, current, own, self._versions.get((namespace, name, version)))
        return lease_home.merged(current, home)

    def _ensure(self, resource: Resource, namespace: str, name: str, version: str) -> None:
        """Create the resource's state Lease (empty, owned by it) unless the read found one of it."""
        if self._versions.get((namespace, name, version)):
            return
        current = self.api.read_custom(resource, namespace, name)
        with contextlib.suppress(ConflictError):  # it exists (a namesake's is taken over by the state write)
            self.api.create_lease(namespace, lease_home.new_home(current, {}))

    def _write(self, namespace: str, resource: Obj, own: dict[str, str | None], condition: str | None) -> Obj:
        """Write the state: conditional on the Lease's resourceVersion as read (`condition`; "" = it did not
        exist, so create it), or unconditionally after a resource write (None)."""
        name = lease_home.home_name(str((resource.get("metadata") or {}).get("name", "")))
        if condition == "":
            return self.api.create_lease(namespace, lease_home.new_home(resource, own))
        written = self.api.merge_lease(namespace, name, lease_home.home_patch(resource, own, condition))
        if written is not None:
            return written
        if condition:
            raise ConflictError(f"patch leases: {name} is gone since it was read")
        return self.api.create_lease(namespace, lease_home.new_home(resource, own))


class _Versions:
    """A bounded memory of which state Lease version went with which read of a resource ("" = none existed),
    so the verifier's mark, written later from that read, is conditional on the Lease it read."""

    SIZE = 4096

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, key: tuple[str, str, str], version: str) -> None:
        with self._lock:
            self._items[key] = version
            self._items.move_to_end(key)
            while len(self._items) > self.SIZE:
                self._items.popitem(last=False)

    def get(self, key: tuple[str, str, str]) -> str | None:
        with self._lock:
            return self._items.get(key)


def _version_of(obj: Obj | None) -> str:
    return "" if obj is None else str((obj.get("metadata") or {}).get("resourceVersion", ""))
