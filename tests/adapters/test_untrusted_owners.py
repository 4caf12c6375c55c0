"""Owners the reactor must not act through (issue 17): an operator it has no adapter for, and links to an
operator's resource that the operator did not build (a tenant can write any ownerReference)."""

from __future__ import annotations

from typing import Any

from reactor.tools.payloads import AlertSpec, notification
from tests.adapters.operators import container, custom, install, owner_ref, reconcile_notebook
from tests.support import NAMESPACE, Reactor


def _outcome(reactor: Reactor, pod: str, container_name: str = "main") -> dict[str, Any]:
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, pod, container_name, 0.1, 4)])
    (outcome,) = reactor.post(body).get_json()["outcomes"]
    return outcome


def _statefulset(reactor: Reactor, name: str, owners: list[dict[str, Any]], labels: dict[str, str]) -> None:
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "ownerReferences": owners},
                       "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"statefulset": name}},
                                "template": {"metadata": {"labels": {"statefulset": name}},
                                             "spec": {"containers": [container("main", 4)]}}}})
    reactor.sim.settle()


def test_a_deployment_of_an_unknown_operator_is_never_patched(reactor: Reactor) -> None:
    reactor.sim.apply({"apiVersion": "acme.example.com/v1", "kind": "ModelServer",
                       "metadata": {"name": "acme", "namespace": NAMESPACE}, "spec": {"size": 1}})
    acme = reactor.sim.get("modelservers", NAMESPACE, "acme")
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "acme-server", "namespace": NAMESPACE, "ownerReferences": owner_ref(acme)},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "acme"}},
                                "template": {"metadata": {"labels": {"app": "acme"}},
                                             "spec": {"containers": [container("main", 4)]}}}})
    reactor.sim.settle()
    (pod,) = [p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE, label_selector="app=acme")]
    outcome = _outcome(reactor, pod)
    assert (outcome["reason"], outcome["workload"]) == ("unsupported-owner", f"ModelServer/{NAMESPACE}/acme")
    assert "ModelServer acme" in outcome["detail"]
    assert sum(n for (verb, _, _), n in reactor.sim.requests.items() if verb == "patch") == 0


def test_links_to_a_notebook_that_its_controller_did_not_build_are_not_believed(reactor: Reactor) -> None:
    install(reactor.sim, "kubeflow.org_notebooks.yaml")
    reactor.sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                       "metadata": {"name": "jupyter", "namespace": NAMESPACE},
                       "spec": {"template": {"spec": {"containers": [container("main", 4)]}}}})
    reconcile_notebook(reactor.sim, "jupyter")
    nb = custom(reactor.sim, "notebooks", "jupyter")
    # A bare pod claiming the notebook: the notebook controller creates StatefulSets, never pods.
    reactor.sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "claims-notebook", "namespace": NAMESPACE,
                                    "ownerReferences": owner_ref(nb)},
                       "spec": {"containers": [container("main", 4)]}})
    # A StatefulSet with the right uid but not the name the notebook controller gives it (the Notebook's).
    _statefulset(reactor, "unlabelled", owner_ref(nb), {})
    # A StatefulSet naming the notebook with the uid of another one (a uid that exists: the garbage collector
    # would delete a dependent of a uid that does not).
    reactor.sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                       "metadata": {"name": "other", "namespace": NAMESPACE},
                       "spec": {"template": {"spec": {"containers": [container("main", 0)]}}}})
    other_uid = custom(reactor.sim, "notebooks", "other")["metadata"]["uid"]
    _statefulset(reactor, "wrong-uid", [dict(owner_ref(nb)[0], uid=other_uid)], {"notebook-name": "jupyter"})
    details = {pod: _outcome(reactor, pod) for pod in ("claims-notebook", "unlabelled-0", "wrong-uid-0")}
    why = {p: o.get("detail") for p, o in details.items()}
    assert {o["reason"] for o in details.values()} == {"owner-unverified"}, why
    assert "Pod → Notebook is not a link" in details["claims-notebook"]["detail"]
    assert "names its StatefulSet jupyter (generateStatefulSet), not unlabelled" in details["unlabelled-0"]["detail"]
    assert f"uid {other_uid!r} is not Notebook jupyter's uid" in details["wrong-uid-0"]["detail"]
    assert reactor.sim.requests[("patch", "notebooks", "")] == 0
    after = custom(reactor.sim, "notebooks", "jupyter")
    assert after["metadata"]["resourceVersion"] == nb["metadata"]["resourceVersion"]
