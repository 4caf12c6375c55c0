"""`reactor doctor` on each release the embedded cluster plays: the server's version, what it serves, and a
failure where the policy asks for what it cannot do (the shipped policy's `cpu.applyTo: pods` before 1.33)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from reactor.app.cli import main
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import Kube, Settings, build_settings
from reactor.core.metrics import Metrics
from reactor.tools.doctor import cluster
from reactor.tools.doctor.report import Check, Status
from reactor_sim import SimCluster
from reactor_sim.versions import MODELLED
from tests.deploy.deploy_helpers import DEPLOY

POLICY = DEPLOY / "reactor" / "policy.yaml"


def _settings(**policy: Any) -> Settings:
    doc = yaml.safe_load(POLICY.read_text())
    doc.update(policy)
    return build_settings(doc, environ={})


def _checks(version: str, **policy: Any) -> dict[str, Check]:
    with SimCluster(kube_version=version).start() as sim:
        kube = KubeGateway.for_url(sim.url, Kube(qps=1000, burst=1000), Metrics(CollectorRegistry()))
        try:
            return {c.name: c for c in cluster.capabilities(kube, _settings(**policy))}
        finally:
            kube.close()


@pytest.mark.parametrize("version", MODELLED)
def test_the_version_and_what_it_serves_are_printed(version: str) -> None:
    checks = _checks(version)
    minor = int(version.split(".")[1])
    assert checks["kubernetes"].status is Status.OK
    detail = checks["kubernetes"].detail
    assert detail.startswith(f"API server v{version}.0: serves ")
    assert ("not in-place resize" in detail) is (minor < 33)
    assert ("sidecars" in detail.split("; not")[0]) is (minor >= 29)
    assert checks["scoped quotas"].status is Status.OK, "the shipped policy has a priority ladder"
    assert checks["sidecars"].status is (Status.OK if minor >= 29 else Status.WARNING)


@pytest.mark.parametrize("version", MODELLED)
def test_apply_to_pods_fails_where_pods_resize_is_not_served(version: str) -> None:
    check = _checks(version)["in-place resize"]
    if int(version.split(".")[1]) >= 33:
        assert check.status is Status.OK and "pods/resize served" in check.detail
    else:
        assert check.status is Status.FAILING
        assert check.detail.startswith(f"cpu.applyTo pods is refused (in-place-unavailable): the API server "
                                       f"(v{version}.0) serves no pods/resize")
        assert "cpu.applyTo: template" in check.fix


def test_apply_to_both_before_1_33_is_a_warning_and_template_needs_nothing() -> None:
    both = _checks("1.28", cpu={"applyTo": "both"})["in-place resize"]
    assert both.status is Status.WARNING and "goes to the template alone" in both.detail
    template = _checks("1.28", cpu={"applyTo": "template"})["in-place resize"]
    assert template.status is Status.OK and template.detail.startswith("not needed")


def test_the_command_fails_on_1_28_with_the_shipped_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimCluster(kube_version="1.28").start() as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        assert main(["doctor", "--kubeconfig", kubeconfig, "--config", str(POLICY)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("ok       kubernetes") and "v1.28.0" in line for line in lines)
    assert any(line.startswith("failing  in-place resize") for line in lines)
