"""What kube-apiserver checks on a core/v1 Event it stores (create and update alike).

Upstream: legacyValidateEvent in pkg/apis/core/validation/events.go, the only check ValidateEventCreate and
ValidateEventUpdate apply to a request through the core/v1 API. Pure: no store, no HTTP. The strict
checks of the events.k8s.io/v1 API are not modelled.
"""

from __future__ import annotations

from typing import Any

from reactor_sim.status import FieldError

Obj = dict[str, Any]
CLUSTER_EVENT_NAMESPACES = ("", "default")  # metav1.NamespaceNone, metav1.NamespaceDefault
NEW_CLUSTER_EVENT_NAMESPACES = ("default", "kube-system")
LENGTH_LIMITS = (("reportingInstance", 128), ("action", 128), ("reason", 128), ("message", 1024))
NAMESPACE_MISMATCH = "does not match event.namespace"


def validate_core_event(event: Obj) -> list[FieldError]:
    """legacyValidateEvent: an Event must live in its object's namespace (a cluster-scoped object's
    Event in `default`); an Event with `eventTime` (a "new" Event) needs the reporting fields."""
    if event.get("eventTime"):
        return _new_event(event)
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved = (event.get("involvedObject") or {}).get("namespace") or ""
    allowed = CLUSTER_EVENT_NAMESPACES if not involved else (involved,)
    if namespace not in allowed:
        return [FieldError("involvedObject.namespace", "Invalid value", NAMESPACE_MISMATCH, involved)]
    return []


def _new_event(event: Obj) -> list[FieldError]:
    errors: list[FieldError] = []
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved = (event.get("involvedObject") or {}).get("namespace") or ""
    if not involved and namespace not in NEW_CLUSTER_EVENT_NAMESPACES:
        errors.append(FieldError("involvedObject.namespace", "Invalid value", NAMESPACE_MISMATCH, involved))
    if not event.get("reportingComponent"):  # reportingController in the internal type
        errors.append(FieldError("reportingController", "Required value", ""))
    for name, limit in LENGTH_LIMITS:
        value = event.get(name) or ""
        if not value and name != "message":
            errors.append(FieldError(name, "Required value", ""))
        if len(value) > limit:
            errors.append(FieldError(name, "Invalid value", f"can have at most {limit} characters", ""))
    return errors
