"""The fake dcgm-exporter speaks dcgm-exporter's names, units and labels (no Prometheus needed)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.promstack.exporter import FB_TOTAL_MIB, FakeDcgmExporter


def scrape(exporter: FakeDcgmExporter) -> dict[str, list]:
    with urllib.request.urlopen(f"http://{exporter.address}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_pods_get_gpus_in_percent_and_mib_and_lose_them_on_removal() -> None:
    with FakeDcgmExporter(gpus=4, hostname="node-x", profiling=True) as exporter:
        exporter.set_pod("ml", "p-0", "main", gpus=2, utilization=[0.25, 1.0], fb_used=0.5)
        metrics = scrape(exporter)
        util = {s.labels["gpu"]: s for s in metrics["DCGM_FI_DEV_GPU_UTIL"]}
        assert len(util) == 4
        assert util["0"].value == 25 and util["1"].value == 100
        assert util["0"].labels["pod"] == "p-0" and util["0"].labels["namespace"] == "ml"
        assert util["0"].labels["container"] == "main" and util["0"].labels["Hostname"] == "node-x"
        assert {"UUID", "pci_bus_id", "device", "modelName"} <= set(util["0"].labels)
        assert util["2"].labels.get("pod", "") == ""  # unassigned GPU: no pod labels
        gr = {s.labels["gpu"]: s.value for s in metrics["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]}
        assert gr["0"] == 0.25
        used = {s.labels["gpu"]: s.value for s in metrics["DCGM_FI_DEV_FB_USED"]}
        free = {s.labels["gpu"]: s.value for s in metrics["DCGM_FI_DEV_FB_FREE"]}
        assert used["0"] + free["0"] == FB_TOTAL_MIB and abs(used["0"] / FB_TOTAL_MIB - 0.5) < 0.01

        exporter.set_pod("ml", "p-0", utilization=0.05)  # keeps its two GPUs
        assert [s.value for s in scrape(exporter)["DCGM_FI_DEV_GPU_UTIL"]][:2] == [5, 5]

        exporter.remove_pod("ml", "p-0")
        assert all(s.labels.get("pod", "") == "" for s in scrape(exporter)["DCGM_FI_DEV_GPU_UTIL"])


def test_without_profiling_there_is_no_gr_engine_metric() -> None:
    with FakeDcgmExporter(gpus=1) as exporter:
        assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in scrape(exporter)


def test_mig_instances_carry_their_labels_and_read_zero_gpu_util() -> None:
    with FakeDcgmExporter(gpus=2) as exporter:
        exporter.set_pod("ml", "nb-0", "notebook", gpus=1, utilization=0.7, mig_profile="1g.18gb")
        exporter.set_pod("ml", "p-0", "main", gpus=1, utilization=0.7)
        util = {s.labels["pod"]: s for s in scrape(exporter)["DCGM_FI_DEV_GPU_UTIL"]}
        assert util["nb-0"].value == 0  # GPU_UTIL is not measured on MIG instances
        assert (util["nb-0"].labels["GPU_I_PROFILE"], util["nb-0"].labels["GPU_I_ID"]) == ("1g.18gb", "1")
        assert util["p-0"].value == 70 and "GPU_I_ID" not in util["p-0"].labels
