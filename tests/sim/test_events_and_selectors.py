"""Requests kube-apiserver refuses where a lenient server would answer: a core/v1 Event in another namespace than
its object (legacyValidateEvent), a label selector labels.Parse cannot parse (400 BadRequest)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.builders import pod
from tests.sim.helpers import status_of


def _event(involved_namespace: str | None, **extra: Any) -> dict[str, Any]:
    involved = {"kind": "Deployment", "name": "web", **({"namespace": involved_namespace} if involved_namespace
                                                         else {})}
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "web."}, "involvedObject": involved,
            "reason": "GPUReactor", "message": "m", "type": "Normal", **extra}


def test_core_event_for_an_object_in_another_namespace_is_422(core: k8s.CoreV1Api) -> None:
    """legacyValidateEvent (ValidateEventCreate through core/v1): `involvedObject.namespace: Invalid value:
    "other": does not match event.namespace`, and nothing is stored."""
    status = status_of(lambda: core.create_namespaced_event("ml", _event("other")), 422)
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "Event"
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "involvedObject.namespace",
                                            "message": 'Invalid value: "other": does not match event.namespace'}]
    assert status["message"].endswith('is invalid: involvedObject.namespace: Invalid value: "other": '
                                      "does not match event.namespace")
    assert core.list_namespaced_event("ml").items == []


def test_core_event_for_a_cluster_scoped_object_lives_in_default(core: k8s.CoreV1Api) -> None:
    """legacyValidateEvent: an Event whose object has no namespace (a Node) is accepted in `default` only."""
    assert core.create_namespaced_event("default", _event(None)).metadata.namespace == "default"
    status_of(lambda: core.create_namespaced_event("ml", _event(None)), 422)


def test_core_event_in_its_objects_namespace_is_created(core: k8s.CoreV1Api) -> None:
    """The reactor's own Events (same namespace as the workload) pass: 201."""
    created = core.create_namespaced_event("ml", _event("ml"))
    assert created.involved_object.namespace == "ml"


def test_core_event_with_event_time_needs_the_reporting_fields(core: k8s.CoreV1Api) -> None:
    """legacyValidateEvent for a "new" Event (eventTime set): reportingController, reportingInstance and
    action are required."""
    body = _event("ml", eventTime="2026-01-01T00:00:00.000000Z")
    status = status_of(lambda: core.create_namespaced_event("ml", body), 422)
    assert [c["field"] for c in status["details"]["causes"]] == ["reportingController", "reportingInstance",
                                                                   "action"]
    body.update(reportingComponent="gpu-reactor", reportingInstance="r-1", action="Resize")
    assert core.create_namespaced_event("ml", body).action == "Resize"


@pytest.mark.parametrize(("selector", "message"), [
    ("app==,", "found '', expected: identifier after ','"),
    ("app=a b", "found 'b', expected: ',' or 'end of string'"),
    ("app in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
    (",app", "found ',', expected: !, identifier, or 'end of string'"),
], ids=["trailing-comma", "two-values", "open-set", "leading-comma"])
def test_malformed_label_selector_is_400_and_lists_nothing(core: k8s.CoreV1Api, selector: str, message: str) -> None:
    """labels.Parse errors: kube-apiserver answers 400 BadRequest with the parser's message, lists nothing."""
    core.create_namespaced_pod("ml", pod())
    status = status_of(lambda: core.list_namespaced_pod("ml", label_selector=selector), 400)
    assert (status["reason"], status["message"]) == ("BadRequest", message)


@pytest.mark.parametrize(("selector", "expected"), [
    ("app==", ["c"]),
    ("app in ()", ["c"]),
    ("gen>1", ["b"]),
    ("gen<2", ["a"]),
    ("app in (web, db)", ["a", "b"]),
], ids=["empty-value", "empty-set", "gt", "lt", "spaces-in-set"])
def test_label_selector_edge_forms_parse_as_upstream(core: k8s.CoreV1Api, selector: str, expected: list[str]) -> None:
    """labels.Parse accepts an empty value (`app==`, `app in ()` match the empty label value) and the Gt/Lt
    operators on integer label values."""
    for name, labels in (("a", {"app": "web", "gen": "1"}), ("b", {"app": "db", "gen": "2"}), ("c", {"app": ""})):
        body = pod(name)
        body["metadata"]["labels"] = labels
        core.create_namespaced_pod("ml", body)
    assert [p.metadata.name for p in core.list_namespaced_pod("ml", label_selector=selector).items] == expected
