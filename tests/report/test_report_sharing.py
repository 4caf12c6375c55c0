"""The sharing probe against a real Prometheus 2.42: two pods reported on one GPU (time-slicing, as dcgm-exporter
reports it: the whole GPU's values for each pod on it) make the probe answer, so that namespace keeps the rules
whole; a namespace whose GPUs each serve one pod does not, and is evaluated without the sharing clauses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from reactor.sources.prometheus import PrometheusApi
from reactor.tools.report.collect import Window, shares_gpus
from reactor.tools.report.expressions import Expressions
from reactor.tools.report.source import PrometheusSource
from reactor.tools.rules import load_values
from tests.report.conftest import serve_history
from tests.report.history import A100_40, END, EXPORTER, Family, _text, times

ROOT = Path(__file__).parents[2]
START = END - timedelta(hours=1)
# (namespace, pod, UUID): in `sliced` two pods are reported on one GPU; in `whole` each GPU has one pod.
PODS = [("sliced", "a-5d4c7b9f8-b2c4d", "GPU-shared"), ("sliced", "b-5d4c7b9f8-f6g7h", "GPU-shared"),
        ("whole", "c-5d4c7b9f8-j8k9l", "GPU-c"), ("whole", "d-5d4c7b9f8-m2n4p", "GPU-d")]


def _history() -> str:
    families = {n: Family(n) for n in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")}
    for namespace, pod, uuid in PODS:
        labels = {**EXPORTER, "gpu": "0", "UUID": uuid, "modelName": A100_40, "Hostname": "node-a",
                  "exported_namespace": namespace, "exported_pod": pod, "exported_container": "main"}
        for t in times(START, END):
            families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].add(labels, t, 0.5)
            families["DCGM_FI_DEV_FB_USED"].add(labels, t, 1000)
            families["DCGM_FI_DEV_FB_FREE"].add(labels, t, 39960)
    return _text(families.values())


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_history(tmp_path_factory.mktemp("report-sharing"), _history()) as served:
        yield served


@pytest.mark.parametrize(("namespace", "shared"), [("sliced", True), ("whole", False)])
def test_the_probe_finds_a_gpu_two_pods_are_reported_on(url: str, namespace: str, shared: bool) -> None:
    expressions = Expressions(load_values(ROOT / "rules/thresholds.yaml"))
    api = PrometheusApi(url, timeout=60)
    source = PrometheusSource(api)
    try:
        assert shares_gpus(source, expressions, namespace, Window(START, END, timedelta(minutes=1))) is shared
        # Where the GPU is shared, the sharing clauses matter: the utilization the rules read is none for those pods
        # (NaN would be read as unknown), and without the clauses it would be the GPU's whole value.
        util = [s.labels["pod"] for s in source.query(expressions.series("gpu_reactor:container_gpu_utilization:ratio",
                                                                          namespace), END)]
        lean = [s.labels["pod"] for s in source.query(expressions.without_sharing().series(
            "gpu_reactor:container_gpu_utilization:ratio", namespace), END)]
        assert sorted(lean) == sorted(pod for ns, pod, _ in PODS if ns == namespace)
        assert (util == []) is shared and (sorted(util) == sorted(lean)) is not shared
    finally:
        api.close()
