"""`reactor doctor`'s signal checks against the real Prometheus the e2e suite runs: which busy signal is in use,
globally and per allowed namespace, whether its series exist, and whether the CPU half has cAdvisor's series.

With the series: the e2e pipeline's Prometheus, scraping the fake dcgm-exporter (no profiling fields) and the
fake cAdvisor beside it, every GPU container of ml-workloads measured. Without: a second Prometheus started
here (the same harness, `promstack`) scraping an exporter with profiling fields and no cAdvisor at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.config.settings import Settings, build_settings
from reactor.tools.doctor import Sources, diagnose
from reactor.tools.doctor.report import Check, Status
from tests.e2e.pipeline import NAMESPACE, Pipeline
from tests.promstack.exporter import FakeDcgmExporter
from tests.promstack.stack import FAST_VALUES, PromStack, WebhookSink, promstack

pytestmark = pytest.mark.promstack

SERVING = "ml-serving"  # a second allowed namespace with its own signal
VLLM = "sum by (namespace, pod, container) (vllm:num_requests_running) / 8"


def _thresholds(tmp: Path, serving: Any) -> Path:
    """The e2e's rule values, with ml-serving given its own signal (what the doctor reads the choice from)."""
    doc = yaml.safe_load(FAST_VALUES.read_text(encoding="utf-8"))
    doc.setdefault("namespaces", {})[SERVING] = {"signal": serving}
    path = tmp / "thresholds.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _settings(**cpu: Any) -> Settings:
    return build_settings({"namespaces": {"allow": [NAMESPACE, SERVING]}, "cpu": cpu}, {})


def _ours(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks if c.name.startswith(("busy-signal", "cpu-metrics"))}


def test_with_the_series_the_signal_and_cpu_are_reported(e2e_pipeline: Pipeline, tmp_path: Path) -> None:
    """gr_engine_active without DCGM_FI_PROF_GR_ENGINE_ACTIVE: a warning that GPU_UTIL stands in; sm_active
    chosen for ml-serving but not exported: failing, what to do named; cAdvisor's series cover every GPU
    container of ml-workloads: ok."""
    p = e2e_pipeline
    sources = Sources(prometheus=p.stack.prometheus_url, thresholds=_thresholds(tmp_path, "sm_active"))
    checks = p.wait(lambda: (lambda c: c if c["cpu-metrics"].status is Status.OK else None)(
        _ours(diagnose(sources, _settings(), "no cluster in this test"))),
        timeout=30, what="every GPU container's throttling recorded", every=0.5)
    assert list(checks) == ["busy-signal", f"busy-signal {SERVING}", f"busy-signal {NAMESPACE}", "cpu-metrics"]
    default = checks["busy-signal"]
    assert default.status is Status.WARNING
    assert default.detail.startswith(f"signal gr_engine_active ({sources.thresholds}; per namespace: {SERVING}: "
                                     "sm_active): DCGM_FI_PROF_GR_ENGINE_ACTIVE is not exported, the rules fall "
                                     "back to DCGM_FI_DEV_GPU_UTIL / 100")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in default.fix
    workloads = checks[f"busy-signal {NAMESPACE}"]
    assert workloads.status is Status.WARNING and "names a pod" not in workloads.detail
    serving = checks[f"busy-signal {SERVING}"]
    assert serving.status is Status.FAILING
    assert serving.detail.startswith("signal sm_active (its own), but DCGM_FI_PROF_SM_ACTIVE is not exported by "
                                     "this dcgm-exporter config")
    assert "add DCGM_FI_PROF_SM_ACTIVE to dcgm-exporter's collectors CSV" in serving.fix
    cpu = checks["cpu-metrics"]
    assert f"every GPU container of {SERVING}, {NAMESPACE} has a throttling measure" in cpu.detail


@pytest.fixture(scope="module")
def bare(e2e_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromStack]:
    """Prometheus scraping an exporter with profiling fields (one pod of ml-workloads) and no kubelet."""
    sink = WebhookSink().start()
    token = tmp_path_factory.mktemp("bare-token") / "token"
    token.write_text("bare-token-0123456789\n")
    try:
        with FakeDcgmExporter(gpus=2, hostname="bare-node", profiling=True) as exporter, promstack(
                tmp_path_factory.mktemp("bare"), exporter=exporter.address, webhook_url=sink.url, token_file=token,
                **e2e_binaries) as stack:
            exporter.set_pod(NAMESPACE, "server-0", "main", gpus=1, utilization=0.5)
            stack.wait_for_query(f'gpu_reactor:container_gpus:count{{namespace="{NAMESPACE}"}}')
            yield stack
    finally:
        sink.stop()


def test_without_cadvisor_no_gpu_would_ever_be_shrunk(bare: PromStack, tmp_path: Path) -> None:
    sources = Sources(prometheus=bare.prometheus_url, thresholds=_thresholds(tmp_path, {"expr": VLLM}))
    checks = _ours(diagnose(sources, _settings(), "-"))
    assert checks["busy-signal"].status is Status.OK
    assert checks["busy-signal"].detail.endswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE has 2 series")
    assert checks[f"busy-signal {NAMESPACE}"].status is Status.OK
    assert checks[f"busy-signal {NAMESPACE}"].detail == ("signal gr_engine_active: DCGM_FI_PROF_GR_ENGINE_ACTIVE "
                                                         f"measures 1 GPUs of {NAMESPACE}'s pods")
    serving = checks[f"busy-signal {SERVING}"]
    assert serving.status is Status.FAILING and "returns no series" in serving.detail
    assert serving.detail.startswith("signal expr `sum by (namespace, pod, container) (vllm:num_requests_running)")
    cpu = checks["cpu-metrics"]
    assert cpu.status is Status.FAILING
    assert ("no cAdvisor series container_cpu_cfs_periods_total and container_cpu_cfs_throttled_periods_total "
            "(plain labels): with cpu.unknownHolds: true no GPU will ever be shrunk") in cpu.detail
    assert "kubelet.serviceMonitor.cAdvisor" in cpu.fix and "cpu.unknownHolds: false" in cpu.fix
    lenient = _ours(diagnose(sources, _settings(unknownHolds=False), "-"))["cpu-metrics"]
    assert lenient.status is Status.WARNING and "GPU shrinks go ahead on GPU utilization alone" in lenient.detail


def test_a_signal_expression_that_does_not_parse_fails_its_namespace(bare: PromStack, tmp_path: Path) -> None:
    sources = Sources(prometheus=bare.prometheus_url, thresholds=_thresholds(tmp_path, {"expr": "sum by ("}))
    serving = _ours(diagnose(sources, _settings(), "-"))[f"busy-signal {SERVING}"]
    assert serving.status is Status.FAILING and "does not evaluate: " in serving.detail and "HTTP 400" in serving.detail
