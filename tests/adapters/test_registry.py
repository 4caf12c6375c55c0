"""The enabled adapters are a value built from the settings, not module state (issue 17): two reactors with
different `adapters.builtin` in one process each resolve through their own, whatever order they were built in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reactor.config.settings import Settings, build_settings
from reactor.core.errors import ConfigError
from reactor.integrations.adapters import Adapters
from reactor.integrations.adapters.builtin import isvc_mode
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import container, custom, install, reconcile_notebook
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings


def _notebook(sim: SimCluster) -> None:
    install(sim, "kubeflow.org_notebooks.yaml")
    sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
               "metadata": {"name": "jupyter", "namespace": NAMESPACE},
               "spec": {"template": {"spec": {"containers": [container("notebook", 4)]}}}})
    reconcile_notebook(sim, "jupyter")


def _outcome(reactor: Reactor) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec("GPUUnderutilized", NAMESPACE, "jupyter-0", "notebook", 0.1, 4)]))
    assert r.status_code == 200, r.get_json()
    (outcome,) = r.get_json()["outcomes"]
    return outcome


def test_two_reactors_with_different_adapters_in_one_process_keep_their_own(sim: SimCluster,
                                                                            token_file: Path) -> None:
    _notebook(sim)
    with_notebooks = build_reactor(sim, make_settings(token_file, **POLICY))
    without = build_reactor(sim, make_settings(token_file, **POLICY, adapters={"builtin": ["RayCluster"]}))
    try:
        refused = _outcome(without)  # built last: a module-wide registry would now have no Notebook in either
        assert (refused["reason"], refused["workload"]) == ("unsupported-owner", f"Notebook/{NAMESPACE}/jupyter")
        applied = _outcome(with_notebooks)
        assert (applied["result"], applied["workload"]) == ("applied", f"Notebook/{NAMESPACE}/jupyter"), applied
        assert custom(sim, "notebooks", "jupyter")["spec"]["template"]["spec"]["containers"][0]["resources"][
            "limits"]["nvidia.com/gpu"] == "1"
    finally:
        with_notebooks.service.kube.close()
        without.service.kube.close()


def test_the_settings_build_the_value_and_nothing_else_holds_it(token_file: Path) -> None:
    settings: Settings = make_settings(token_file, adapters={"builtin": ["Notebook"]})
    assert isinstance(settings.adapters, Adapters)
    assert settings.adapters == make_settings(token_file, adapters={"builtin": ["Notebook"]}).adapters
    assert [a.kind for a in settings.adapters] == ["Notebook"] and settings.adapters.get("RayCluster") is None
    import reactor.integrations.adapters.base as base
    assert not [n for n, v in vars(base).items() if isinstance(v, (dict, list, set)) and not n.startswith("__")]


def test_rayservice_without_raycluster_is_a_clear_error_at_start(token_file: Path) -> None:
    """A RayService's pods are found through the RayCluster KubeRay builds: enabling one without the other would
    leave them `unsupported-owner` silently, so the policy is refused at start, naming the key."""
    from reactor.core.errors import ConfigError
    try:
        make_settings(token_file, adapters={"builtin": ["RayService"]})
    except ConfigError as e:
        assert "adapters.builtin" in str(e) and "RayService needs RayCluster" in str(e), str(e)
    else:
        raise AssertionError("RayService without RayCluster was accepted")
    assert [a.kind for a in make_settings(token_file, adapters={"builtin": ["RayCluster", "RayService"]}).adapters] \
        == ["RayCluster", "RayService"]


def test_the_incremental_upgrade_gate_is_declared_in_the_policy_and_checked() -> None:
    """adapters.rayServiceIncrementalUpgrade: true, false or unset; anything else is refused at start, naming the
    key. The RayService adapter of each Settings value reads its own declaration."""
    incremental = {"spec": {"upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade"}}}
    for declared, refused in ((None, True), (False, True), (True, False)):
        doc = {} if declared is None else {"adapters": {"rayServiceIncrementalUpgrade": declared}}
        adapter = build_settings(doc, {}).adapters.get("RayService")
        assert adapter is not None
        assert ("resize-gpu" in adapter.forbidden(incremental)) is refused, declared
        assert "scale-replicas" in adapter.forbidden(incremental)  # replicas never reach a RayCluster either way
    with pytest.raises(ConfigError, match="adapters.rayServiceIncrementalUpgrade"):
        build_settings({"adapters": {"rayServiceIncrementalUpgrade": "yes"}}, {})


def test_kserves_deployment_mode_reads_as_kserve_reads_it() -> None:
    """kserve v0.20.0 utils GetDeploymentMode: status first, then the annotation, legacy names normalised."""
    def isvc(status: str | None, annotation: str | None) -> dict[str, Any]:
        return {"metadata": {"annotations": {"serving.kserve.io/deploymentMode": annotation} if annotation else {}},
                "status": {"deploymentMode": status} if status else {}}
    assert isvc_mode(isvc("Knative", "Standard")) == "Knative"
    assert isvc_mode(isvc(None, "RawDeployment")) == "Standard"
    assert isvc_mode(isvc(None, "Serverless")) == "Knative"
    assert isvc_mode(isvc(None, None)) == ""
