"""The API verbs with kube-apiserver semantics: get, list, create, update, patch, delete, scale.

This is the one path every write takes, from HTTP and from the controllers alike: defaulting,
admission, validation, optimistic concurrency, then the store. It speaks no HTTP.
"""

from __future__ import annotations

import random
from typing import Any

from reactor_sim import admission, managed_fields, micro_time, objects, resize, schema, taints, validation, webhooks
from reactor_sim import patch as patches
from reactor_sim.objects import Clock, Obj
from reactor_sim.registry import Registry, Resource
from reactor_sim.selectors import SelectorError, parse_fields, parse_labels, selector_string
from reactor_sim.status import FieldError, bad_request, conflict, generic_invalid, invalid, not_found
from reactor_sim.store import Store, clone

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
CONTROLLERS = "kube-controller-manager"  # the field manager of the in-process controllers' writes


class Api:
    def __init__(self, store: Store, registry: Registry, clock: Clock, seed: int = 0) -> None:
        self.store, self.registry, self.clock = store, registry, clock
        self.rng = random.Random(seed)

    def plurals(self) -> list[tuple[str, str]]:
        return [(r.plural, r.qualified) for r in self.registry.resources]

    def get(self, res: Resource, ns: str | None, name: str) -> Obj:
        obj = self.store.get(res.plural, ns if res.namespaced else None, name)
        if obj is None:
            raise not_found(res, name)
        return obj

    def list(self, res: Resource, ns: str | None, label_selector: str | None = None,
             field_selector: str | None = None, *, copies: bool = True) -> tuple[list[Obj], str]:
        """The matching objects; `copies=False`: the stored objects themselves, read only (an answer that is
        only serialised: at 100,000 objects the copies cost more than the list)."""
        try:
            labels, fields = parse_labels(label_selector), parse_fields(field_selector, res.plural)
        except SelectorError as e:
            raise bad_request(str(e)) from e
        namespace = ns if res.namespaced else None
        stored = self.store.items(res.plural, namespace) if copies else self.store.view(res.plural, namespace)
        items = [o for o in stored if labels(o["metadata"].get("labels") or {}) and fields(o)]
        return items, str(self.store.resource_version)

    def random_suffix(self, length: int = 5) -> str:
        return "".join(self.rng.choice(NAME_ALPHABET) for _ in range(length))

    # -- create -----------------------------------------------------------------------------------

    def create(self, res: Resource, ns: str | None, body: Obj, *, dry_run: bool = False,
               manager: str = CONTROLLERS) -> Obj:
        obj = self._normalise(res, ns, body)
        meta = obj["metadata"]
        if res.namespaced and not self.store.exists("namespaces", None, meta["namespace"]):
            raise not_found(self.registry.by_plural("namespaces"), meta["namespace"])
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + self.random_suffix()
        if not meta.get("name"):
            raise invalid(res, "", [FieldError("metadata.name", "Required value",
                                               "name or generateName is required")])
        if self.store.exists(res.plural, meta.get("namespace"), meta["name"]):
            from reactor_sim.status import already_exists
            raise already_exists(res, meta["name"])
        objects.prepare_create(obj, uid=self.store.next_uid(), clock=self.clock)
        if self.registry.schema_of(res) is not None:
            meta["generation"] = 1  # every custom object carries a generation
        objects.default_workload(obj)
        self._admit_create(res, obj)
        managed_fields.record_create(obj, manager, objects.timestamp(self.clock),
                                     has_status="status" in res.subresources)
        if dry_run:
            return obj
        if res.kind == "CustomResourceDefinition":
            try:
                self.registry.add_crd(obj)
            except ValueError as e:
                raise invalid(res, meta["name"], [FieldError("spec", "Required value", str(e))]) from e
        stored = self.store.adopt(res.plural, obj)  # obj is this call's own copy (`_normalise`)
        self.after_write(res, meta.get("namespace"))
        return clone(stored)

    def _normalise(self, res: Resource, ns: str | None, body: Obj) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was not a JSON object")
        obj = clone(body)
        obj["apiVersion"], obj["kind"] = body.get("apiVersion") or res.api_version, body.get("kind") or res.kind
        if obj["kind"] != res.kind:
            raise bad_request(f"the API version in the data ({obj['apiVersion']}) does not match the expected "
                              f"API version ({res.api_version})")
        undecodable = micro_time.decode_error(res.group, res.kind, obj)
        if undecodable is not None:  # the handler's decode fails before anything else (transformDecodeError)
            version = str(obj["apiVersion"]).rpartition("/")[2]
            raise bad_request(f'{obj["kind"]} in version "{version}" cannot be handled as a {res.kind}: {undecodable}')
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") and ns and meta["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent "
                                  "on the request")
            meta["namespace"] = ns or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        return obj

    def _admit_create(self, res: Resource, obj: Obj) -> None:
        self._admit_custom(res, obj)
        kind = obj["kind"]
        if not self.registry.version.sidecars:
            validation.drop_sidecar_restart_policy(obj, None, kind)
        if kind == "Pod":
            validation.default_pod(obj)
            admission.mutate_pod(self.store, res, obj)
        if kind == "LimitRange":
            admission.default_limit_range(obj)
        if kind == "Node":
            taints.admit_node(obj)
        errors = validation.validate_object(obj, kind)
        if errors:
            raise invalid(res, obj["metadata"]["name"], errors)
        if kind == "Pod":
            admission.validate_pod(self.store, res, obj, self.plurals())

    # -- update and patch -------------------------------------------------------------------------

    def update(self, res: Resource, ns: str | None, name: str, body: Obj, *, subresource: str = "",
               dry_run: bool = False, manager: str = CONTROLLERS) -> Obj:
        old = self.get(res, ns, name)
        new = self._normalise(res, ns, body)
        if new["metadata"].get("name") != name:
            raise bad_request(f"the name of the object ({new['metadata'].get('name')}) does not match the "
                              f"name on the URL ({name})")
        if not new["metadata"].get("resourceVersion") and res.plural in objects.NO_UNCONDITIONAL_UPDATE:
            raise invalid(res, name, [FieldError("metadata.resourceVersion", "Invalid value",
                                                 "must be specified for an update", _Hex0())])
        return self._write_update(res, old, new, subresource=subresource, dry_run=dry_run, manager=manager)

    def patch(self, res: Resource, ns: str | None, name: str, content_type: str, body: Any, *,
              subresource: str = "", dry_run: bool = False, manager: str = CONTROLLERS) -> Obj:
        old = self.get(res, ns, name)
        try:
            new = patches.apply(content_type, old, body)
        except patches.PatchError as e:
            raise generic_invalid() from e
        if not isinstance(new, dict):
            raise generic_invalid()
        return self._write_update(res, old, new, subresource=subresource, dry_run=dry_run, manager=manager)

    def _write_update(self, res: Resource, old: Obj, new: Obj, *, subresource: str, dry_run: bool,
                      manager: str = CONTROLLERS) -> Obj:
        name = old["metadata"]["name"]
        rv = new.get("metadata", {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        if subresource == "status":
            new = dict(clone(old), status=new.get("status", {}))
        elif subresource == "resize":
            new = self._prepare_resize(res, old, new)
            resize.admit(self.store, res, old, new, self.plurals())
            if not self.registry.version.resize_conditions:
                resize.mark_proposed(old, new)
        else:
            if not self.registry.version.sidecars:
                validation.drop_sidecar_restart_policy(new, old, old.get("kind", res.kind))
            objects.default_workload(new)
            objects.prepare_update(old, new, has_status="status" in res.subresources)
            self._custom_generation(res, old, new)
            self._validate_update(res, old, new)
            webhooks.validate_update(res, old, new)  # an operator's validating webhook, after the schema
        new["apiVersion"], new["kind"] = old.get("apiVersion", res.api_version), old.get("kind", res.kind)
        managed_fields.record_update(old, new, manager, objects.timestamp(self.clock), subresource=subresource,
                                     has_status="status" in res.subresources)
        if objects.strip_rv(new) == objects.strip_rv(old) or dry_run:
            return new if dry_run else old
        if res.kind == "CustomResourceDefinition" and not subresource:
            # apiextensions-apiserver's crdHandler serves a CRD's versions as its spec says them now: a version
            # marked served by an update is served from then on (a Kueue upgrade adding v1beta2).
            try:
                self.registry.add_crd(new)
            except ValueError as e:
                raise invalid(res, name, [FieldError("spec", "Required value", str(e))]) from e
        stored = self.store.put(res.plural, new)
        self.after_write(res, new["metadata"].get("namespace"))
        return stored

    def _prepare_resize(self, res: Resource, old: Obj, new: Obj) -> Obj:
        """pods/NAME/resize (podResizeStrategy): only containers' resources and resizePolicy are taken
        from the request (defaulted like any decoded Pod), then ValidatePodResize (as the release played
        has it: v1.33 refuses lowering a memory limit in place). The desired resources are stored in spec; the
        kubelet step (scheduler) reports them in status.containerStatuses."""
        validation.default_pod(new)
        resized = validation.drop_non_resize_updates(new, old)
        decrease = self.registry.version.minor != 33
        errors = validation.validate_object(resized, "Pod") + validation.validate_pod_resize(
            old, resized, memory_decrease=decrease)
        if errors:
            raise invalid(res, old["metadata"]["name"], errors)
        return resized

    def _admit_custom(self, res: Resource, obj: Obj) -> None:
        """A custom object is pruned and validated against its CRD's schema (built-ins: no-op)."""
        found = self.registry.schema_of(res, str(obj.get("apiVersion", "")))
        if found is None:
            return
        errors = schema.admit(obj, found)
        if errors:
            raise invalid(res, obj["metadata"].get("name", ""), errors)

    def _custom_generation(self, res: Resource, old: Obj, new: Obj) -> None:
        """A custom object's generation grows on every change but metadata (and status, with its subresource)."""
        if self.registry.schema_of(res) is None:
            return
        ignored = {"metadata", "status"} if "status" in res.subresources else {"metadata"}
        before = {k: v for k, v in old.items() if k not in ignored}
        after = {k: v for k, v in new.items() if k not in ignored}
        new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + (before != after)

    def _validate_update(self, res: Resource, old: Obj, new: Obj) -> None:
        self._admit_custom(res, new)
        kind = old.get("kind", res.kind)
        if kind == "LimitRange":
            admission.default_limit_range(new)
        # Upstream validates the new object first, then the update (ValidatePodUpdate, jobStrategy):
        # Invalid causes come before the Forbidden/immutable ones.
        errors = validation.validate_object(new, kind)
        if kind == "Pod":
            errors += validation.validate_pod_update(old, new)
        if kind == "Job":
            errors += validation.validate_job_update(old, new)
        if errors:
            raise invalid(res, old["metadata"]["name"], errors)

    # -- delete -----------------------------------------------------------------------------------

    def delete(self, res: Resource, ns: str | None, name: str) -> Obj:
        obj = self.get(res, ns, name)
        self.store.delete(res.plural, obj["metadata"].get("namespace"), name)
        self._cascade(obj)
        self.after_write(res, obj["metadata"].get("namespace"))
        if res.kind == "Pod":
            obj["metadata"]["deletionTimestamp"] = objects.timestamp(self.clock)
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            return obj
        details = {"name": name, **({"group": res.group} if res.group else {}), "kind": res.plural,
                   "uid": obj["metadata"]["uid"]}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _cascade(self, owner: Obj) -> None:
        """Background garbage collection, done at once: dependents and a namespace's contents go too."""
        meta = owner["metadata"]
        keys = {key for key, _ in self.store.dependents(meta["uid"])}
        if owner.get("kind") == "Namespace":
            keys |= {k for k in self.store.all_keys() if k[1] == meta["name"]}
        for plural, ns, name in sorted(keys):
            obj = self.store.delete(plural, ns, name)
            if obj is not None:
                self._cascade(obj)

    def controller_write(self, plural: str, new: Obj, *, adopt: bool = False) -> Obj:
        """A controller's write of an object it read from the store (status, or its own spec fields), with the
        managedFields entry kube-controller-manager's write gets (a status-only change: its status entry)."""
        meta = new["metadata"] = dict(new["metadata"])  # the stored object's metadata may be shared: not changed
        old = self.store.get(plural, meta.get("namespace"), meta["name"])
        if old is not None:
            res = self.registry.by_plural(plural)
            only_status = {k: v for k, v in old.items() if k != "status"} == \
                {k: v for k, v in new.items() if k != "status"}
            has_status = "status" in res.subresources
            managed_fields.record_update(old, new, CONTROLLERS, objects.timestamp(self.clock),
                                         subresource="status" if only_status and has_status else "",
                                         has_status=has_status)
        return self.store.adopt(plural, new) if adopt else self.store.put(plural, new)

    # -- scale subresource ------------------------------------------------------------------------

    def get_scale(self, res: Resource, ns: str | None, name: str) -> Obj:
        obj = self.get(res, ns, name)
        meta = obj["metadata"]
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                  "creationTimestamp") if k in meta},
                "spec": {"replicas": obj.get("spec", {}).get("replicas", 1)},
                "status": {"replicas": obj.get("status", {}).get("replicas", 0),
                           "selector": selector_string(obj.get("spec", {}).get("selector"))}}

    def write_scale(self, res: Resource, ns: str | None, name: str, scale: Obj) -> Obj:
        obj = self.get(res, ns, name)
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != obj["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise invalid(_SCALE, name, [FieldError("spec.replicas", "Invalid value",
                                                    "must be greater than or equal to 0", replicas)])
        obj["spec"]["replicas"] = replicas
        self._write_update(res, self.get(res, ns, name), obj, subresource="", dry_run=False)
        return self.get_scale(res, ns, name)

    # -- side effects of writes -------------------------------------------------------------------

    def after_write(self, res: Resource, ns: str | None) -> None:
        """The resource-quota controller's part, done synchronously: keep status.used current."""
        if not ns:
            return
        for quota in self.store.view("resourcequotas", ns):
            hard = (quota.get("spec") or {}).get("hard") or {}
            status = {"hard": dict(hard), "used": admission.quota_used(self.store, self.plurals(), quota)}
            if quota.get("status") != status:  # a new stored version; the old one, shared parts included, stays as is
                self.store.adopt("resourcequotas", dict(quota, metadata=dict(quota["metadata"]), status=status))


class _Hex0(str):
    def __new__(cls) -> _Hex0:
        return super().__new__(cls, "0x0")


_SCALE = Resource("autoscaling", "v1", "Scale", "scale", True)
