"""`reactor doctor` against the real Prometheus and Alertmanager: every check reported, failures named.

Healthy: the session stack (rules loaded, deploy/alertmanager's route to the webhook sink). Broken: a second
pair started here — Prometheus with no GPU rules scraping two exporters that report the same GPU for two
pods (time-slicing), Alertmanager with no route for reactor="gpu" and kube-prometheus-stack's InfoInhibitor,
and a tenant's pod serving DCGM-named series of another team's pod as a target of its own (job
team-b-metrics in namespace team-b).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from reactor.app.cli import main
from reactor.config.settings import Settings, load_settings
from reactor.tools.doctor import Sources, diagnose, sources
from reactor.tools.doctor.report import Check, Status
from reactor.tools.launcher import free_port
from tests.promstack.exporter import FakeDcgmExporter
from tests.promstack.stack import (
    EXPORTER_TARGET_LABELS,
    PromStack,
    WebhookSink,
    _spawn,
    _wait_ready,
    prometheus_config,
)

pytestmark = pytest.mark.promstack

REPO = Path(__file__).resolve().parents[2]
NS = "ml-workloads"
PROMETHEUS = ["dcgm-metrics", "label-spelling", "gpu-rules", "shared-gpus", "exporter-scrape", "dcgm-sources"]
SIGNALS = ["busy-signal", "cpu-metrics"]  # tests/e2e/test_doctor_signals.py checks them with and without data
ORDER = [*PROMETHEUS, "webhook-token", *SIGNALS, "alertmanager-route", "alert-inhibition", "reactor-webhook",
         "confirm", "confirm-rules", "kubernetes"]
BROKEN_ALERTMANAGER = {
    "route": {"receiver": "default", "routes": [{"receiver": "slack", "matchers": ['severity="critical"']}]},
    "receivers": [{"name": "default"}, {"name": "slack"}],
    # kube-prometheus-stack's default: mutes severity=info in a namespace with no other alert firing.
    "inhibit_rules": [{"source_matchers": ['alertname="InfoInhibitor"'], "target_matchers": ['severity="info"'],
                       "equal": ["namespace"]}],
}


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(REPO / "deploy/reactor/policy.yaml", environ={})


def _by_name(checks: list[Check]) -> dict[str, Check]:
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), names
    return {c.name: c for c in checks}


@pytest.fixture(scope="module")
def broken(promstack_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromStack]:
    workdir = tmp_path_factory.mktemp("doctor-broken")
    exporters = [FakeDcgmExporter(gpus=1, hostname="shared-node").start() for _ in range(2)]
    for i, exporter in enumerate(exporters):  # the same GPU (same UUID) reported for two pods
        exporter.set_pod(NS, f"sliced-{i}", "main", utilization=0.9)
    tenant = FakeDcgmExporter(gpus=1, hostname="tenant-node").start()
    tenant.set_pod("team-a", "victim", "main", utilization=0.0)
    exporters.append(tenant)
    am_port, prom_port = free_port(), free_port()
    am_url, prom_url = f"http://127.0.0.1:{am_port}", f"http://127.0.0.1:{prom_port}"
    (workdir / "none.rules.yaml").write_text("groups: []\n")
    config = prometheus_config(rule_file=workdir / "none.rules.yaml", exporter=exporters[0].address,
                               alertmanager=f"127.0.0.1:{am_port}", target_labels=EXPORTER_TARGET_LABELS,
                               honor_labels=False)
    config["scrape_configs"][0]["static_configs"][0]["targets"].append(exporters[1].address)
    config["scrape_configs"].append({"job_name": "team-b-metrics", "honor_labels": False, "static_configs": [
        {"targets": [tenant.address], "labels": {"namespace": "team-b", "pod": "metrics-6c9f", "container": "m"}}]})
    (workdir / "prometheus.yaml").write_text(yaml.safe_dump(config))
    (workdir / "alertmanager.yaml").write_text(yaml.safe_dump(BROKEN_ALERTMANAGER))
    stack = PromStack(prom_url, am_url, workdir / "none.rules.yaml")
    try:
        stack.processes.append(_spawn("alertmanager", [
            promstack_binaries["alertmanager_bin"], f"--config.file={workdir / 'alertmanager.yaml'}",
            f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
            f"--web.external-url={am_url}", "--cluster.listen-address="], workdir))
        stack.processes.append(_spawn("prometheus", [
            promstack_binaries["prometheus_bin"], f"--config.file={workdir / 'prometheus.yaml'}",
            f"--storage.tsdb.path={workdir / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
            f"--web.external-url={prom_url}"], workdir))
        for process, url in zip(stack.processes, (am_url, prom_url), strict=True):
            _wait_ready(process, url, 20)
        stack.wait_for_query('count(DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}) == 3')
        yield stack
    finally:
        stack.stop()
        for exporter in exporters:
            exporter.stop()


def test_a_healthy_stack_passes_every_check(stack: PromStack, dcgm_exporter: FakeDcgmExporter,
                                            webhook_sink: WebhookSink, settings: Settings) -> None:
    dcgm_exporter.set_pod(NS, "doctor-6d5f7c9b8-x7k2p", "server", gpus=1, utilization=0.5)
    stack.wait_for_query('gpu_reactor:container_gpu_utilization:ratio{pod="doctor-6d5f7c9b8-x7k2p"}')
    sources = Sources(prometheus=stack.prometheus_url, alertmanager=stack.alertmanager_url,
                      reactor_url=webhook_sink.url)
    confirming = replace(settings, confirm=replace(settings.confirm, url=stack.prometheus_url))
    checks = _by_name(diagnose(sources, confirming, "no cluster in this test"))
    assert list(checks) == ORDER
    for name in [*PROMETHEUS, "alertmanager-route", "alert-inhibition", "confirm", "confirm-rules"]:
        assert checks[name].status is Status.OK, checks[name]
    # No --thresholds: the signal in use is unknown; no cAdvisor scraped: no GPU would ever be shrunk.
    assert checks["busy-signal"].status is Status.WARNING and "--thresholds" in checks["busy-signal"].fix
    assert checks["cpu-metrics"].status is Status.FAILING
    assert "exported labels, as the rules read (loaded rules)" in checks["label-spelling"].detail
    assert f"go to gpu-reactor ({webhook_sink.url})" in checks["alertmanager-route"].detail
    # The sink answers 200 to anyone; the reactor would answer 401 without the token.
    assert checks["reactor-webhook"].status is Status.WARNING and "without a token" in checks["reactor-webhook"].detail
    assert checks["kubernetes"].status is Status.WARNING and "not checked" in checks["kubernetes"].detail
    # The count is the one Prometheus shows for the rule file's group (the CPU and memory alerts included).
    loaded = json.loads(urllib.request.urlopen(f"{stack.prometheus_url}/api/v1/rules", timeout=10).read())
    ours = [g for g in loaded["data"]["groups"] if g["name"] == "gpu-reactor"]
    assert checks["gpu-rules"].detail.startswith(f"{sum(len(g['rules']) for g in ours)} rules loaded")
    # No reactor is scraped here: its 401 counter cannot speak for the token.
    assert checks["webhook-token"].status is Status.WARNING and "not scraped" in checks["webhook-token"].detail


def test_a_wrong_reactor_url_fails(stack: PromStack, settings: Settings) -> None:
    sources = Sources(alertmanager=stack.alertmanager_url, reactor_url="http://gpu-reactor.gpu-reactor.svc:8080")
    check = _by_name(diagnose(sources, settings, "-"))["reactor-webhook"]
    assert check.status is Status.FAILING
    assert "not http://gpu-reactor.gpu-reactor.svc:8080/alerts" in check.detail


def test_rules_not_loaded_route_missing_and_shared_gpus_are_named(broken: PromStack, settings: Settings) -> None:
    sources = Sources(prometheus=broken.prometheus_url, alertmanager=broken.alertmanager_url,
                      thresholds=REPO / "rules/thresholds.yaml")
    checks = _by_name(diagnose(sources, settings, "-"))
    # The tenant's fake GPU counts here (any target's series); the rules never read it (dcgm-sources).
    assert checks["dcgm-metrics"].status is Status.OK and checks["dcgm-metrics"].detail.startswith("2 GPUs on 2 hosts")
    rules = checks["gpu-rules"]
    assert rules.status is Status.FAILING and "no gpu_reactor recording rules" in rules.detail
    assert "release" in rules.fix
    spelling = checks["label-spelling"]  # no rules loaded: read from thresholds.yaml
    assert spelling.status is Status.OK and "rules/thresholds.yaml" in spelling.detail
    shared = checks["shared-gpus"]
    assert shared.status is Status.WARNING
    assert f"{NS}/sliced-0, {NS}/sliced-1" in shared.detail and "on shared-node" in shared.detail
    route = checks["alertmanager-route"]
    assert route.status is Status.FAILING and "go to default, which has no webhook" in route.detail
    assert 'reactor=\\"gpu\\"' in route.fix or 'reactor="gpu"' in route.fix


def test_the_info_inhibitor_is_reported_when_an_alert_is_info(broken: PromStack, settings: Settings) -> None:
    from reactor.tools.doctor import alertmanager

    config = alertmanager.loaded_config(broken.alertmanager_url)
    check = alertmanager.not_muted(config, NS, {"GPUMetricsMissing": "info", "GPUIdle": "warning"})
    assert check.status is Status.WARNING
    assert "GPUMetricsMissing (severity info)" in check.detail and "GPUIdle" not in check.detail


def test_the_command_exits_1_and_prints_one_line_per_check(broken: PromStack, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_CONFIRM__PROMETHEUS_URL", broken.prometheus_url)  # a port-forward to it
    code = main(["doctor", "--prometheus", broken.prometheus_url, "--alertmanager", broken.alertmanager_url,
                 "--config", str(REPO / "deploy/reactor/policy.yaml"), "--kubeconfig", "/nonexistent/kubeconfig"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    # rules/thresholds.yaml by default: the signal of the policy's one allowed namespace too.
    signal = len(PROMETHEUS) + 1
    assert [ln.split()[1] for ln in lines] == [*PROMETHEUS, "webhook-token", "busy-signal", "busy-signal",
                                               *ORDER[signal + 1:]]
    signal += 1
    assert lines[signal].split()[1:3] == ["busy-signal", "ml-workloads"]
    assert lines[2].startswith("failing  gpu-rules") and " -> " in lines[2]
    assert lines[-1].startswith("failing  kubernetes")
    assert lines[-2].startswith("failing  confirm-rules")  # the broken stack loads none of the reactor's rules


def test_a_tenants_dcgm_target_is_named_and_the_exporters_scrape_checked(broken: PromStack, settings: Settings) -> None:
    """Issue 23, item 5: the exporter is scraped with the honorLabels the rules assume, and a tenant's pod serving
    DCGM_FI_* series is named (the rules ignore it only while it cannot forge its target labels)."""
    sources_ = Sources(prometheus=broken.prometheus_url, thresholds=REPO / "rules/thresholds.yaml")
    checks = _by_name(diagnose(sources_, settings, "-"))
    scrape = checks["exporter-scrape"]  # shipped thresholds: the job and the exporter's usual namespaces
    assert scrape.status is Status.OK and "honorLabels: false" in scrape.detail, scrape
    assert "gpu-operator" in scrape.detail
    found = checks["dcgm-sources"]
    assert found.status is Status.FAILING, found
    assert "job=team-b-metrics" in found.detail and "namespace=team-b" in found.detail
    assert "1 other targets" in found.detail  # the exporter's two targets are not named


def test_an_exporter_scraped_with_the_wrong_honor_labels_fails(broken: PromStack) -> None:
    plain = sources.Exporter("dcgm-exporter", "", "plain", "test")
    targets = sources._active_targets(broken.prometheus_url)
    check = sources.exporter_scrape(broken.prometheus_url, plain, targets)
    assert check.status is Status.FAILING and "honorLabels: True" in check.detail, check
    exported = sources.Exporter("dcgm-exporter", "gpu-operator", "exported", "test")
    assert sources.exporter_scrape(broken.prometheus_url, exported, targets).status is Status.OK
    nobody = sources.Exporter("nvidia-dcgm-exporter", "", "exported", "test")
    missing = sources.exporter_scrape(broken.prometheus_url, nobody, targets)
    assert missing.status is Status.FAILING and "no active scrape target" in missing.detail
    only = sources.dcgm_sources(broken.prometheus_url, sources.Exporter(".+", "", "exported", "test"), targets)
    assert only.status is Status.OK, only
