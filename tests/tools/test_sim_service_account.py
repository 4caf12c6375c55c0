"""`reactor sim --rbac` and the reactor's own ServiceAccount: the kubeconfig it writes beside the admin one holds a
TokenRequest token for deploy/reactor's gpu-reactor ServiceAccount, and `reactor serve`'s assembly (kube.kubeconfig,
as REACTOR_KUBE__KUBECONFIG sets it) acts through it, within that account's RBAC."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from prometheus_client import CollectorRegistry

from reactor.app.assembly import assemble
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.tools.launcher import state_key_file
from reactor.tools.local_run import allowed_namespaces
from reactor.tools.sim_command import print_account_help, seed, write_reactor_kubeconfig
from reactor_sim import SimCluster
from tests.support import HERE, NAMESPACE, TOKEN, Reactor, feeding_client, release, with_prometheus

ROOT = HERE.parent
SA_USER = "system:serviceaccount:gpu-reactor:gpu-reactor"
pytestmark = [pytest.mark.process,
              pytest.mark.skipif(shutil.which("kubectl") is None,
                                 reason="deploy/reactor is rendered with kubectl kustomize")]


SEEDS = [str(ROOT / "deploy" / "reactor"), str(HERE / "fixtures" / "cluster.yaml")]


@pytest.fixture
def rbac_sim() -> Iterator[SimCluster]:
    with SimCluster(rbac=True).start(tls=True) as sim:
        seed(sim, SEEDS)
        yield sim


def _client(path: str) -> k8s.ApiClient:
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=path, client_configuration=config)
    return k8s.ApiClient(config)


def test_the_reactor_kubeconfig_acts_as_its_service_account(rbac_sim: SimCluster, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    admin = rbac_sim.write_kubeconfig(tmp_path / "sim.kubeconfig")
    path = write_reactor_kubeconfig(rbac_sim, admin)
    assert path == str(tmp_path / "sim-gpu-reactor.kubeconfig")
    assert f"REACTOR_KUBE__KUBECONFIG={path}" in capsys.readouterr().out
    with _client(path) as c:
        review = k8s.AuthorizationV1Api(c).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"namespace": NAMESPACE, "verb": "patch", "group": "apps",
                                             "resource": "deployments"}}})
        assert review.status.allowed is True
        with pytest.raises(k8s.ApiException) as refused:
            k8s.CoreV1Api(c).list_namespaced_secret(NAMESPACE)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"].startswith(f'secrets is forbidden: User "{SA_USER}" cannot list')


def test_reactor_serve_assembled_with_that_kubeconfig_acts(rbac_sim: SimCluster, tmp_path: Path) -> None:
    """What `REACTOR_KUBE__KUBECONFIG=… reactor serve` builds: the gateway from the kubeconfig (https, the sim's CA,
    the ServiceAccount's token); a GPUUnderutilized alert shrinks the Deployment through it."""
    path = write_reactor_kubeconfig(rbac_sim, rbac_sim.write_kubeconfig(tmp_path / "sim.kubeconfig"))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    settings = build_settings({"namespaces": {"allow": [NAMESPACE]}, "server": {"tokenFile": str(token_file)},
                               "state": {"keyFile": str(state_key_file(tmp_path))},
                               "kube": {"kubeconfig": path, "timeout": "5s"}, "logging": {"format": "text"}}, {})
    settings, stand_in = with_prometheus(settings)
    registry = CollectorRegistry()
    service = assemble(settings, metrics=Metrics(registry))
    reactor = Reactor(service, feeding_client(service, stand_in), rbac_sim, registry, stand_in)
    release(reactor)
    try:
        outcomes = reactor.post(reactor.alerts("GPUUnderutilized", "llm-inference", "server")).get_json()["outcomes"]
    finally:
        service.kube.close()
    assert {(o["result"], o["action"]) for o in outcomes} == {("applied", "resize-gpu")}
    assert not rbac_sim.denied


def test_without_the_reactor_account_no_kubeconfig_is_written(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with SimCluster(rbac=True).start(tls=True) as sim:
        admin = sim.write_kubeconfig(tmp_path / "sim.kubeconfig")
        assert write_reactor_kubeconfig(sim, admin) is None
        print_account_help(admin)
    out = capsys.readouterr().out
    assert f"kubectl --kubeconfig {admin} create token NAME -n NAMESPACE" in out
    assert not (tmp_path / "sim-gpu-reactor.kubeconfig").exists()


def test_the_printed_allow_list_becomes_ready_as_the_reactors_service_account(tmp_path: Path) -> None:
    """`reactor sim --rbac --seed deploy/reactor …` prints a serve line allowing the namespaces the seeds put GPU
    workloads in: not the reactor's own `gpu-reactor`, where its ServiceAccount has no rights (allowed, its watch
    cache was refused there and /readyz stayed 503). Served with that allow list and the watch cache, as the printed
    line does, every informer lists and the reactor is ready."""
    with SimCluster(rbac=True).start(tls=True) as sim:
        loaded = seed(sim, SEEDS)
        allow = allowed_namespaces(loaded)
        assert "gpu-reactor" not in allow and NAMESPACE in allow, allow
        path = write_reactor_kubeconfig(sim, sim.write_kubeconfig(tmp_path / "sim.kubeconfig"))
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        settings = build_settings({"namespaces": {"allow": allow}, "server": {"tokenFile": str(token_file)},
                                   "state": {"keyFile": str(state_key_file(tmp_path))},
                                   "kube": {"kubeconfig": path, "timeout": "5s", "watchCache": True},
                                   "confirm": {"enabled": False}, "logging": {"format": "text"}}, {})
        service = assemble(settings, metrics=Metrics(CollectorRegistry()))
        informers = service.informers
        assert informers is not None
        try:
            informers.run_once()
            informers.check()  # what /readyz asks: raises while any kind is not listed
            assert not sim.denied, sim.denied
        finally:
            service.kube.close()
