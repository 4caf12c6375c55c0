"""The owner links the reactor believes (reactor/core/ownership.py): kind pairs, uids and selectors, on plain dicts."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.core.ownership import ControllerRef, controller_ref, link_failure, selector_matches

LABELS = {"app": "llm", "tier": "gpu"}


@pytest.mark.parametrize(("selector", "expected"), [
    ({"matchLabels": {"app": "llm"}}, True),
    ({"matchLabels": {"app": "other"}}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["cpu"]}]}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cpu"]}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, False),
    ({"matchLabels": {"app": "llm"}, "matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ({"matchLabels": "app=llm"}, False),
], ids=["labels", "labels-differ", "in", "in-miss", "notin", "notin-absent-key", "exists", "doesnotexist",
        "unknown-operator", "both-must-hold", "malformed"])
def test_selector_semantics_of_metav1_labelselector(selector: dict[str, Any], expected: bool) -> None:
    assert selector_matches(selector, LABELS) is expected


def _obj(uid: str, labels: dict[str, str] | None = None, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"uid": uid, "labels": labels or {}}, "spec": {}}
    if selector is not None:
        obj["spec"]["selector"] = selector
    return obj


def test_controller_ref_needs_controller_true() -> None:
    pod = {"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "a", "uid": "1"},
                                            {"kind": "ReplicaSet", "name": "b", "uid": "2", "controller": True}]}}
    assert controller_ref(pod) == ControllerRef("ReplicaSet", "b", "2")
    assert controller_ref({"metadata": {"ownerReferences": [{"kind": "X", "controller": "true"}]}}) is None


@pytest.mark.parametrize(("child_kind", "ref", "owner", "failure"), [
    ("Pod", ControllerRef("ReplicaSet", "rs", "u1"), _obj("u1", selector={"matchLabels": {"app": "llm"}}), None),
    ("Pod", ControllerRef("Deployment", "d", "u1"), _obj("u1", selector={"matchLabels": {"app": "llm"}}),
     "Pod → Deployment is not a link a Kubernetes controller creates"),
    ("Pod", ControllerRef("ReplicaSet", "rs", "u2"), _obj("u1", selector={"matchLabels": {"app": "llm"}}),
     "the ownerReference's uid 'u2' is not ReplicaSet rs's uid"),
    ("Pod", ControllerRef("ReplicaSet", "rs", "u1"), _obj("u1"), "ReplicaSet rs has no selector"),
    ("Pod", ControllerRef("StatefulSet", "s", "u1"), _obj("u1", selector={"matchLabels": {"app": "x"}}),
     "StatefulSet s's selector does not match the Pod's labels"),
    ("Job", ControllerRef("CronJob", "c", "u1"), _obj("u1"), None),
    ("Job", ControllerRef("CronJob", "c", ""), _obj(""), "the ownerReference's uid '' is not CronJob c's uid"),
], ids=["pod-rs", "pod-deployment", "uid-differs", "no-selector", "selector-misses", "job-cronjob", "empty-uids"])
def test_link_failure(child_kind: str, ref: ControllerRef, owner: dict[str, Any], failure: str | None) -> None:
    assert link_failure(child_kind, _obj("c", labels=LABELS), ref, owner) == failure


def test_a_replicaset_is_matched_by_its_template_labels() -> None:
    """The Deployment controller adopts a ReplicaSet whose template labels its selector matches."""
    rs = {"metadata": {"labels": {}}, "spec": {"template": {"metadata": {"labels": LABELS}}}}
    deploy = _obj("d1", selector={"matchLabels": {"app": "llm"}})
    assert link_failure("ReplicaSet", rs, ControllerRef("Deployment", "d", "d1"), deploy) is None
    rs["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    assert link_failure("ReplicaSet", rs, ControllerRef("Deployment", "d", "d1"), deploy) is not None
