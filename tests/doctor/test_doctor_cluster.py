"""`reactor doctor`'s Kubernetes checks on the embedded cluster with RBAC on, asked as the reactor's ServiceAccount."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from reactor.kube import KubeGateway
from reactor.metrics import Metrics
from reactor.settings import Settings, build_settings
from reactor.sim import SimCluster
from reactor.tools.doctor import Sources, cluster, diagnose
from reactor.tools.doctor.report import Check, Status
from tests.deploy.deploy_helpers import DEPLOY, render
from tests.deploy.test_rbac_proof import NEEDED_BY, SA_TOKEN, _cluster
from tests.support import NAMESPACE

WHO = "system:serviceaccount:gpu-reactor:gpu-reactor"


def _settings(**policy: Any) -> Settings:
    doc = yaml.safe_load((DEPLOY / "reactor" / "policy.yaml").read_text())
    doc.update(policy)
    return build_settings(doc, environ={})


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster_ = _cluster(render("reactor"))
    try:
        yield cluster_
    finally:
        cluster_.stop()


def _doctor(sim: SimCluster, settings: Settings) -> dict[str, Check]:
    kube = KubeGateway.for_url(sim.url, settings.kube, Metrics(CollectorRegistry()), token=SA_TOKEN)
    try:
        checks = diagnose(Sources(impersonate=WHO), settings, kube)
    finally:
        kube.close()
    return {c.name: c for c in checks}


def test_the_required_grants_are_the_proven_ones() -> None:
    """The doctor asks for exactly the grants tests/deploy/test_rbac_proof.py proves needed, no more, no less."""
    assert sorted(cluster.NAMESPACED + cluster.CLUSTER) == sorted(NEEDED_BY)


def test_as_deployed_every_cluster_check_passes(sim: SimCluster) -> None:
    checks = _doctor(sim, _settings())
    assert {n for n in checks if n.startswith(("rbac", "priority", "bounds"))} == {
        f"rbac {NAMESPACE}", "rbac cluster", "priority-classes", f"bounds {NAMESPACE}"}
    for name in (f"rbac {NAMESPACE}", "rbac cluster", "priority-classes", f"bounds {NAMESPACE}"):
        assert checks[name].status is Status.OK, checks[name]
    assert checks[f"rbac {NAMESPACE}"].detail == f"{WHO} may make all 14 calls the reactor makes"
    # Asked through SelfSubjectAccessReview, one per grant, and nothing refused along the way.
    reviews = sum(n for (verb, resource, _), n in sim.requests.items()
                  if verb == "create" and "selfsubjectaccessreviews" in resource)
    assert reviews == 15, sim.requests
    assert not sim.denied


def test_a_namespace_without_the_role_binding_fails_and_names_the_calls(sim: SimCluster) -> None:
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    checks = _doctor(sim, _settings(namespaces={"allow": [NAMESPACE, "team-b"], "deny": ["kube-system"]}))
    assert checks[f"rbac {NAMESPACE}"].status is Status.OK
    failed = checks["rbac team-b"]
    assert failed.status is Status.FAILING and "patch deployments" in failed.detail and "get pods" in failed.detail
    assert "policy.namespaces.allow" in failed.fix
    assert checks["bounds team-b"].status is Status.FAILING  # cannot even list its quota


def test_a_missing_priority_class_fails(sim: SimCluster) -> None:
    checks = _doctor(sim, _settings(priorityLadder=["medium-priority-gpu", "ultra-gpu"]))
    check = checks["priority-classes"]
    assert check.status is Status.FAILING and check.detail.endswith("do not exist: ultra-gpu")


def test_a_namespace_without_quota_or_limitrange_is_a_warning(sim: SimCluster) -> None:
    sim.delete("resourcequotas", NAMESPACE, "gpu-quota")
    for lr in copy.deepcopy(sim.list("limitranges", NAMESPACE)):
        sim.delete("limitranges", NAMESPACE, lr["metadata"]["name"])
    check = _doctor(sim, _settings())[f"bounds {NAMESPACE}"]
    assert check.status is Status.WARNING
    assert check.detail == "no ResourceQuota and no LimitRange for nvidia.com/gpu"


def test_a_missing_cluster_grant_fails(sim: SimCluster) -> None:
    sim.delete("clusterrolebindings", None, "gpu-reactor-priorityclasses")
    check = _doctor(sim, _settings())["rbac cluster"]
    assert check.status is Status.FAILING and check.detail == f"{WHO} may not: list priorityclasses"
