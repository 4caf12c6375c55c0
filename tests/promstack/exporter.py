"""A fake dcgm-exporter for the end-to-end tests: dcgm-exporter's metric names and labels, over HTTP.

Its own `CollectorRegistry` (nothing global), served on 127.0.0.1 on an ephemeral port. GPUs of
one node are handed to pods by `set_pod`; the rest are exported without pod labels, as
dcgm-exporter does. Every change is atomic: one scrape sees all of it or none of it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric

from tests.promstack.target import ScrapeTarget

_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
_POD_LABELS = ("namespace", "pod", "container")
FB_TOTAL_MIB = 143_771  # an H200


@dataclass
class _Pod:
    namespace: str
    pod: str
    container: str
    gpus: list[int]
    utilization: list[float]  # 0-1 per GPU
    fb_used: float
    mig_profile: str | None = None  # its GPUs are MIG instances of this profile


@dataclass
class _State:
    pods: dict[tuple[str, str], _Pod] = field(default_factory=dict)


class FakeDcgmExporter(ScrapeTarget):
    """`set_pod(...)`, `remove_pod(...)`, `stop()`; `address` is what Prometheus scrapes."""

    def __init__(self, *, gpus: int = 8, hostname: str = "gpu-node-1", model: str = "NVIDIA H200", profiling: bool = False) -> None:
        self.gpu_count = gpus
        self.hostname = hostname
        self.model = model
        self.profiling = profiling  # also export DCGM_FI_PROF_GR_ENGINE_ACTIVE
        self._lock = threading.Lock()
        self._state = _State()
        super().__init__()

    # --- the test API ---

    def set_pod(
        self,
        namespace: str,
        pod: str,
        container: str = "main",
        *,
        utilization: float | Sequence[float],
        gpus: int | None = None,
        fb_used: float = 0.5,
        mig_profile: str | None = None,
    ) -> None:
        """Give the pod `gpus` GPUs at `utilization` (0-1: one value for all, or one per GPU).

        A later call without `gpus` keeps the pod's GPUs; `fb_used` is the framebuffer used ratio.
        With `mig_profile` (e.g. "1g.18gb") each GPU is a MIG instance: its series carry
        `GPU_I_PROFILE` and `GPU_I_ID`, and `DCGM_FI_DEV_GPU_UTIL` reads 0, as on real MIG devices.
        """
        per_gpu = [float(utilization)] if isinstance(utilization, (int, float)) else [float(u) for u in utilization]
        with self._lock:
            current = self._state.pods.get((namespace, pod))
            count = gpus or (len(current.gpus) if current else len(per_gpu))
            if len(per_gpu) == 1:
                per_gpu *= count
            if len(per_gpu) != count:
                raise ValueError(f"{len(per_gpu)} utilization values for {count} GPUs")
            held = current.gpus if current and len(current.gpus) == count else self._free_gpus(count, current)
            self._state.pods[(namespace, pod)] = _Pod(namespace, pod, container, held, per_gpu, fb_used, mig_profile)

    def remove_pod(self, namespace: str, pod: str) -> None:
        """Drop every series of the pod (its GPUs go back to the pool, unassigned)."""
        with self._lock:
            self._state.pods.pop((namespace, pod), None)

    def _free_gpus(self, count: int, current: _Pod | None) -> list[int]:
        taken = {g for p in self._state.pods.values() if p is not current for g in p.gpus}
        free = [g for g in range(self.gpu_count) if g not in taken]
        if len(free) < count:
            raise ValueError(f"only {len(free)} free GPUs on {self.hostname}, {count} asked")
        return free[:count]

    # --- the Collector protocol ---

    def _gpu_labels(self, index: int) -> list[str]:
        host = sum(map(ord, self.hostname)) % 256
        return [
            str(index),
            f"GPU-{host:02x}{index:02x}0000-0000-0000-0000-000000000000",
            f"00000000:{host:02X}:{index:02X}.0",
            f"nvidia{index}",
            self.model,
            self.hostname,
        ]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            pods = list(self._state.pods.values())
        owner = {g: (p, i) for p in pods for i, g in enumerate(p.gpus)}
        families = {
            "util": GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
            "gr": GaugeMetricFamily("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
            "used": GaugeMetricFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
            "free": GaugeMetricFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
        }
        for index in range(self.gpu_count):
            pod, i = owner.get(index, (None, 0))
            workload = [pod.namespace, pod.pod, pod.container] if pod else ["", "", ""]
            labels = dict(zip(_LABELS + _POD_LABELS, self._gpu_labels(index) + workload))
            mig = pod.mig_profile if pod else None
            if mig:
                labels.update(GPU_I_PROFILE=mig, GPU_I_ID=str(i + 1))
            util = pod.utilization[i] if pod else 0.0
            used = round(FB_TOTAL_MIB * (pod.fb_used if pod else 0.0))
            self._sample(families["util"], labels, 0 if mig else round(util * 100))
            self._sample(families["gr"], labels, util)
            self._sample(families["used"], labels, used)
            self._sample(families["free"], labels, FB_TOTAL_MIB - used)
        yield families["util"]
        if self.profiling:
            yield families["gr"]
        yield families["used"]
        yield families["free"]

    @staticmethod
    def _sample(family: GaugeMetricFamily, labels: dict[str, str], value: float) -> None:
        # Per-sample label sets: MIG series carry two labels the others do not.
        family.add_sample(family.name, labels, value)
