"""`reactor doctor`'s Kubernetes checks on the embedded cluster with RBAC on.

As a person runs it: an admin kubeconfig, asking as the reactor's ServiceAccount through impersonation
(`--as`); and as the reactor's own pod would: the ServiceAccount's token (a TokenRequest), no impersonation.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.app.cli import main
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Settings, build_settings
from reactor.tools.doctor import Sources, cluster, connect_cluster, diagnose
from reactor.tools.doctor.report import Check, Status
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster
from tests.deploy.deploy_helpers import DEPLOY, render
from tests.deploy.test_rbac_proof import CACHE_NEEDED, NEEDED_BY, STATE_NEEDED, _cluster
from tests.support import NAMESPACE

WHO = "system:serviceaccount:gpu-reactor:gpu-reactor"
POLICY = DEPLOY / "reactor" / "policy.yaml"


def _settings(**policy: Any) -> Settings:
    doc = yaml.safe_load(POLICY.read_text())
    doc.update(policy)
    return build_settings(doc, environ={})


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster_ = _cluster(render("reactor"))
    try:
        yield cluster_
    finally:
        cluster_.stop()


@pytest.fixture
def admin_kubeconfig(sim: SimCluster, tmp_path: Path) -> str:
    return sim.write_kubeconfig(tmp_path / "admin.kubeconfig")


def _doctor(settings: Settings, kubeconfig: str, impersonate: str | None = WHO) -> dict[str, Check]:
    kube = connect_cluster(settings, kubeconfig, impersonate)
    assert isinstance(kube, KubeGateway), kube
    try:
        checks = diagnose(Sources(impersonate=impersonate, kubeconfig=kubeconfig), settings, kube)
    finally:
        kube.close()
    return {c.name: c for c in checks}


def _sa_kubeconfig(sim: SimCluster, tmp_path: Path) -> str:
    token = sim.service_account_token("gpu-reactor", "gpu-reactor")
    return sim.write_kubeconfig(tmp_path / "sa.kubeconfig", token=token)


def _reviews(sim: SimCluster) -> int:
    return sum(n for (verb, resource, _), n in sim.requests.items()
               if verb == "create" and "selfsubjectaccessreviews" in resource)


def test_the_required_grants_are_the_proven_ones() -> None:
    """The doctor asks for exactly the grants tests/deploy/test_rbac_proof.py proves needed, no more, no less."""
    grants = cluster.namespaced_grants(_settings()) + cluster.CLUSTER + cluster.KUEUE_CLUSTER + cluster.LEASE
    assert sorted(grants) == sorted([*NEEDED_BY, *STATE_NEEDED])
    assert sorted(cluster.CACHE_NAMESPACED + cluster.CACHE_CLUSTER) == sorted(CACHE_NEEDED)


def test_as_deployed_every_cluster_check_passes(sim: SimCluster, admin_kubeconfig: str) -> None:
    checks = _doctor(_settings(), admin_kubeconfig)
    names = [f"rbac {NAMESPACE}", "rbac cluster", "rbac lease", "rbac ledger", "priority-classes",
             f"bounds {NAMESPACE}"]
    assert [n for n in checks if n.startswith(("rbac", "priority", "bounds"))] == names
    for name in names:
        assert checks[name].status is Status.OK, checks[name]
    # 35 calls (pods/resize, Kueue, the adapters' kinds, an InferenceService's state Lease and Events' repeats included), and
    # 13 list/watch for kube.watchCache
    assert checks[f"rbac {NAMESPACE}"].detail == f"{WHO} may make all 48 calls the reactor makes"
    assert checks["rbac lease"].detail == f"{WHO} may hold the verifier Lease gpu-reactor/gpu-reactor-verifier"
    assert checks["rbac ledger"].detail == f"{WHO} may keep the state ledger in Lease gpu-reactor/gpu-reactor-state"
    assert _reviews(sim) == 58  # one SelfSubjectAccessReview per grant


def test_with_the_service_accounts_own_token(sim: SimCluster, tmp_path: Path) -> None:
    """In the reactor's pod: its own token, no impersonation; the answers are the same."""
    kubeconfig = _sa_kubeconfig(sim, tmp_path)
    checks = _doctor(_settings(), kubeconfig, impersonate=None)
    assert checks[f"rbac {NAMESPACE}"].status is Status.OK and checks["rbac cluster"].status is Status.OK
    assert checks[f"rbac {NAMESPACE}"].detail.startswith("this client may make all 48 calls")


def test_without_impersonation_rights_the_kubernetes_checks_fail_clearly(sim: SimCluster, tmp_path: Path) -> None:
    kubeconfig = _sa_kubeconfig(sim, tmp_path)
    checks = _doctor(_settings(), kubeconfig, impersonate="system:serviceaccount:kube-system:admin")
    assert checks["kubernetes"].status is Status.FAILING and "impersonate" in checks["kubernetes"].detail


def test_a_namespace_without_the_role_binding_fails_and_names_the_calls(sim: SimCluster, admin_kubeconfig: str) -> None:
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    checks = _doctor(_settings(namespaces={"allow": [NAMESPACE, "team-b"], "deny": ["kube-system"]}), admin_kubeconfig)
    assert checks[f"rbac {NAMESPACE}"].status is Status.OK
    failed = checks["rbac team-b"]
    assert failed.status is Status.FAILING and "patch deployments" in failed.detail and "get pods" in failed.detail
    assert "policy.namespaces.allow" in failed.fix
    # Every read is made as the reactor (impersonated): it cannot list team-b's quota either.
    assert checks["bounds team-b"].status is Status.FAILING and "403" in checks["bounds team-b"].detail


def test_a_missing_priority_class_fails(sim: SimCluster, admin_kubeconfig: str) -> None:
    settings = _settings(priorityLadder=["medium-priority-gpu", "ultra-gpu"])
    check = _doctor(settings, admin_kubeconfig)["priority-classes"]
    assert check.status is Status.FAILING and check.detail.endswith("do not exist: ultra-gpu")


def test_a_namespace_without_quota_or_limitrange_is_a_warning(sim: SimCluster, admin_kubeconfig: str) -> None:
    sim.delete("resourcequotas", NAMESPACE, "gpu-quota")
    for lr in copy.deepcopy(sim.list("limitranges", NAMESPACE)):
        sim.delete("limitranges", NAMESPACE, lr["metadata"]["name"])
    check = _doctor(_settings(), admin_kubeconfig)[f"bounds {NAMESPACE}"]
    assert check.status is Status.WARNING
    assert check.detail == "no ResourceQuota and no LimitRange for nvidia.com/gpu"


def test_a_missing_cluster_grant_fails(sim: SimCluster, admin_kubeconfig: str) -> None:
    sim.delete("clusterrolebindings", None, "gpu-reactor-priorityclasses")
    check = _doctor(_settings(), admin_kubeconfig)["rbac cluster"]
    assert check.status is Status.FAILING and check.detail == (
        f"{WHO} may not: list priorityclasses, get clusterqueues, list workloadpriorityclasses, watch priorityclasses")


def test_the_command_exits_0_with_warnings_only(sim: SimCluster, admin_kubeconfig: str,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with PrometheusStandIn() as prometheus:  # the confirm step's Prometheus, through a "port-forward"
        monkeypatch.setenv("REACTOR_CONFIRM__PROMETHEUS_URL", prometheus.url)
        code = main(["doctor", "--kubeconfig", admin_kubeconfig, "--config", str(POLICY), "--as", WHO])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    # confirm (answers, rules loaded: tests/doctor/test_doctor_confirm.py), the server (kubernetes, in-place resize,
    # scoped quotas, sidecars: tests/doctor/test_doctor_versions.py), then rbac namespace, rbac cluster, rbac lease,
    # rbac ledger, priority-classes, bounds
    assert [ln.split()[0] for ln in lines] == ["warning", "warning"] + ["ok"] * 2 + ["ok"] * 4 + ["ok"] * 6
    assert lines[0].startswith("warning  prometheus") and "not checked" in lines[0]


def test_a_ledger_lease_the_role_does_not_name_fails(sim: SimCluster, admin_kubeconfig: str) -> None:
    """Issue 23: the state ledger is written before every change; a name the Role does not grant is a 403 on each."""
    checks = _doctor(_settings(state={"ledgerName": "another-ledger"}), admin_kubeconfig)
    failed = checks["rbac ledger"]
    assert failed.status is Status.FAILING and "get leases" in failed.detail and "another-ledger" in failed.detail


def test_an_allowed_namespace_that_does_not_exist_is_said_so(sim: SimCluster, admin_kubeconfig: str) -> None:
    """Not an RBAC failure: asked as the person (the reactor's ServiceAccount may not read Namespaces), the API
    server answers 404 for the Namespace (registry/core/namespace, Get)."""
    checks = _doctor(_settings(namespaces={"allow": [NAMESPACE, "team-gone"], "deny": ["kube-system"]}),
                     admin_kubeconfig)
    gone = checks["rbac team-gone"]
    assert (gone.status, gone.detail) == (Status.FAILING, "namespace team-gone does not exist")
    assert "may not" not in gone.detail and "bounds team-gone" not in checks
    assert checks[f"rbac {NAMESPACE}"].status is Status.OK


def test_the_namespace_question_goes_without_impersonation_and_leaves_the_shared_client_as_it_was(
        sim: SimCluster, admin_kubeconfig: str) -> None:
    """Whether a Namespace exists is asked as the person (the reactor's ServiceAccount may not read Namespaces). It
    used to lift `Impersonate-User` from the client's default headers for the call and put it back: any request
    another thread sent meanwhile went out as the person, not as the reactor. Now that one request leaves it out."""
    kube = connect_cluster(_settings(), admin_kubeconfig, WHO)
    assert isinstance(kube, KubeGateway), kube
    client = kube._client
    sent: list[tuple[str, str | None, str | None]] = []
    call_api = client.call_api

    def recording(method: str, url: str, header_params: dict[str, str] | None = None, *a: Any, **k: Any) -> Any:
        own = (header_params or {}).get("Impersonate-User")
        sent.append((url, own, client.default_headers.get("Impersonate-User")))
        return call_api(method, url, header_params, *a, **k)

    client.call_api = recording
    try:
        assert kube.namespace_exists(NAMESPACE) is True
        assert kube.namespace_exists("team-gone") is False
        kube.version()
    finally:
        kube.close()
    asked = [(own, shared) for url, own, shared in sent if "/namespaces/" in url]
    assert asked == [(None, WHO), (None, WHO)], "sent as the person, the shared client still impersonating"
    assert [own for url, own, _ in sent if url.endswith("/version/")] == [WHO]
