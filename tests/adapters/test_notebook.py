"""Kubeflow Notebook v1 over HTTP against the embedded cluster with the CRD installed (issue 17).

The reactor changes the Notebook's pod template (never the StatefulSet the notebook controller owns), by a
JSON merge patch that carries the whole container list, conditional on the resourceVersion it read.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from tests.adapters.operators import GPU, container, custom, install, reconcile_notebook
from tests.support import NAMESPACE, Reactor

POD = "jupyter-0"


@pytest.fixture
def notebook(reactor: Reactor) -> dict[str, Any]:
    install(reactor.sim, "kubeflow.org_notebooks.yaml")
    sidecar = {"name": "oauth-proxy", "image": "quay.io/oauth2-proxy:7", "args": ["--upstream=http://localhost"]}
    reactor.sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                       "metadata": {"name": "jupyter", "namespace": NAMESPACE},
                       "spec": {"template": {"spec": {"priorityClassName": "medium-priority-gpu",
                                                      "containers": [container("notebook", 4), sidecar]}}}})
    reconcile_notebook(reactor.sim, "jupyter")
    return custom(reactor.sim, "notebooks", "jupyter")


def _post(reactor: Reactor, name: str, *, status: str = "firing", **kw: Any) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, POD, "notebook", status=status, **kw)]))
    assert r.status_code == 200, r.get_json()
    (outcome,) = r.get_json()["outcomes"]
    return outcome


def _containers(reactor: Reactor) -> list[dict[str, Any]]:
    return custom(reactor.sim, "notebooks", "jupyter")["spec"]["template"]["spec"]["containers"]


def _gpus(reactor: Reactor) -> str:
    return _containers(reactor)[0]["resources"]["limits"][GPU]


def test_an_idle_notebook_is_shrunk_through_the_notebook_not_its_statefulset(reactor: Reactor,
                                                                              notebook: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"Notebook/{NAMESPACE}/jupyter")
    containers = _containers(reactor)
    assert containers[0]["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
    assert containers[1] == notebook["spec"]["template"]["spec"]["containers"][1]  # the sidecar, whole
    assert reactor.sim.requests[("patch", "notebooks", "")] == 1
    assert reactor.sim.requests[("patch", "statefulsets", "")] == 0
    annotations = custom(reactor.sim, "notebooks", "jupyter")["metadata"]["annotations"]
    assert "gpu-reactor.io/last-action" in annotations
    events = [e for e in reactor.sim.list("events", NAMESPACE) if e["involvedObject"]["kind"] == "Notebook"]
    assert [(e["reason"], e["involvedObject"]["apiVersion"]) for e in events] == [("GPUResized", "kubeflow.org/v1")]


def test_a_saturated_notebook_grows(reactor: Reactor, notebook: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)
    assert outcome["result"] == "applied", outcome
    assert int(_gpus(reactor)) > 4


def test_a_starved_notebook_moves_up_the_priority_ladder(reactor: Reactor, notebook: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUSaturated", value=0.99, gpus=4)
    assert outcome["result"] == "applied", outcome
    spec = custom(reactor.sim, "notebooks", "jupyter")["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "high-priority-gpu"


def test_a_resolved_grow_is_reverted_on_the_notebook(reactor: Reactor, notebook: dict[str, Any]) -> None:
    assert _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)["result"] == "applied"
    assert _gpus(reactor) != "4"
    reconcile_notebook(reactor.sim, "jupyter")  # the operator rolls the change out
    outcome = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved")
    assert (outcome["result"], outcome.get("action")) == ("applied", "revert"), outcome
    assert _gpus(reactor) == "4"


def test_the_operators_rollout_in_progress_refuses(reactor: Reactor, notebook: dict[str, Any]) -> None:
    nb = custom(reactor.sim, "notebooks", "jupyter")
    nb["spec"]["template"]["spec"]["containers"][0]["image"] = "jupyter/scipy:2"
    reactor.sim.apply(nb)
    reconcile_notebook(reactor.sim, "jupyter", settle=False)  # the StatefulSet has not rolled yet
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "rollout-in-progress", outcome
    assert "StatefulSet jupyter" in outcome["detail"]
    assert _gpus(reactor) == "4"


def test_plan_explains_a_notebook_shrink_and_writes_nothing(reactor: Reactor, notebook: dict[str, Any]) -> None:
    engine = reactor.service.engine
    engine.decider.actor.dry_run = True
    from reactor.intake.alerts import parse_notification
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, POD, "notebook", 0.1, 4)])
    assert reactor.prometheus is not None
    reactor.prometheus.observe(body)  # a genuine alert: the rules fire it (the confirm step asks)
    outcomes = engine.handle(parse_notification(body))
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(outcomes, engine.settings)
    assert f"workload: Notebook/{NAMESPACE}/jupyter" in out.getvalue()
    assert "would apply: " in out.getvalue() and "notebook" in out.getvalue()
    assert _gpus(reactor) == "4"


def test_the_statefulset_the_notebook_controller_builds_is_believed(reactor: Reactor,
                                                                    notebook: dict[str, Any]) -> None:
    """Issue 24 item 1: the notebook controller (generateStatefulSet) puts no label on the StatefulSet itself, only
    on its pod template, and CopyStatefulSetFields wipes any added later; the link is confirmed by the name and
    the template's notebook-name label, so an alert on its pod acts."""
    sts = reactor.sim.get("statefulsets", NAMESPACE, "jupyter")
    assert not sts["metadata"].get("labels")
    assert sts["spec"]["template"]["metadata"]["labels"]["notebook-name"] == "jupyter"
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"Notebook/{NAMESPACE}/jupyter"), outcome


def test_the_reactors_state_on_the_notebook_restarts_no_pod(reactor: Reactor, notebook: dict[str, Any]) -> None:
    """The notebook controller copies the Notebook's annotations into the pod template only when it creates the
    StatefulSet (and keys containing "notebook" never); CopyStatefulSetFields copies the template's spec alone. So
    the reactor's state annotations, and the verifier's mark, leave the running template as it was."""
    nb = custom(reactor.sim, "notebooks", "jupyter")
    nb["metadata"].setdefault("annotations", {})["gpu-reactor.io/mode"] = "enforce"
    reactor.sim.apply(nb)
    reconcile_notebook(reactor.sim, "jupyter")
    before = reactor.sim.get("statefulsets", NAMESPACE, "jupyter")["spec"]["template"]
    assert reactor.service.verifier is not None
    assert _post(reactor, "GPUSaturated", value=0.99, gpus=4)["result"] == "applied"
    reconcile_notebook(reactor.sim, "jupyter")
    reactor.service.verifier.check_all()
    reconcile_notebook(reactor.sim, "jupyter")
    after = reactor.sim.get("statefulsets", NAMESPACE, "jupyter")["spec"]["template"]
    assert after["metadata"] == before["metadata"]
    assert "gpu-reactor.io/last-action" in custom(reactor.sim, "notebooks", "jupyter")["metadata"]["annotations"]
