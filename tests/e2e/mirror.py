"""dcgm-exporter's pod attribution over the embedded cluster, for the end-to-end tests.

The fake exporter reports the GPU containers of the pods that run in the cluster now: a pod a
rollout created gains series, a deleted one loses them, as dcgm-exporter's kubelet pod-resources
mapping does. Utilization comes from a demand per workload (GPU-equivalents of work spread over
its desired replicas), so an action changes what the exporter reports the way it would on a real
cluster: shrinking a workload that wastes GPUs raises their utilization, adding capacity to a
saturated one lowers it. Nothing here talks to the reactor.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import Metric

from reactor_sim import SimCluster
from tests.promstack.cadvisor import FakeCadvisor
from tests.promstack.exporter import FakeDcgmExporter, _Pod

GPU = "nvidia.com/gpu"


class NodeExporter(FakeDcgmExporter):
    """The simulated node's dcgm-exporter, which can also lose GPUs: a lost GPU has no series at all, as
    when DCGM stops reading it or the exporter stops reporting it, and is never handed to a pod again.
    (A GPU whose pod ended stays reported, free: that is how the rules tell the two apart.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lost: set[int] = set()

    def lose_pod_gpus(self, namespace: str, pod: str) -> None:
        """The GPUs the pod holds stop being reported, and with them every series of the pod."""
        with self._lock:
            held = self._state.pods.pop((namespace, pod), None)
            if held is not None:
                self._lost.update(held.gpus)

    def _free_gpus(self, count: int, current: _Pod | None) -> list[int]:
        # Called under the lock by set_pod.
        taken = {g for p in self._state.pods.values() if p is not current for g in p.gpus} | self._lost
        free = [g for g in range(self.gpu_count) if g not in taken]
        if len(free) < count:
            raise ValueError(f"only {len(free)} free GPUs on {self.hostname}, {count} asked")
        return free[:count]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            lost = {str(g) for g in self._lost}
        for family in super().collect():
            family.samples = [s for s in family.samples if s.labels["gpu"] not in lost]
            yield family


@dataclass(frozen=True)
class WorkloadDemand:
    resource: str  # "deployments" | "statefulsets"
    name: str
    demand: float  # GPU-equivalents of work across all replicas
    mig_profile: str | None = None  # the pods' GPUs are MIG instances (no GPU_UTIL, no profiling metrics)


class ClusterMirror:
    """Keeps `exporter` in line with the running pods of `namespace`; `start()` syncs in a thread."""

    def __init__(self, sim: SimCluster, exporter: NodeExporter, namespace: str,
                 cadvisor: FakeCadvisor | None = None) -> None:
        self.sim, self.exporter, self.namespace, self.cadvisor = sim, exporter, namespace, cadvisor
        self._throttling: dict[str, float] = {}  # by the pods' `app` label; cAdvisor reports 0 for the rest
        self._lock = threading.Lock()
        self._demand: dict[str, WorkloadDemand] = {}  # by the pods' `app` label
        self._silenced: set[str] = set()
        self._reported: dict[str, tuple[str, int, float]] = {}  # pod -> (container, gpus, utilization)
        self._mig: dict[str, str | None] = {}
        self._triggers: list[tuple[Callable[[], bool], Callable[[], None]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    # --- what the test drives ---

    def set_demand(self, app: str, resource: str, name: str, demand: float, *, mig_profile: str | None = None) -> None:
        """Report the pods labelled `app` (only those of workloads with a demand are reported)."""
        with self._lock:
            self._demand[app] = WorkloadDemand(resource, name, demand, mig_profile)

    def set_throttling(self, app: str, ratio: float) -> None:
        """cAdvisor reports the GPU containers of the pods labelled `app` CPU-throttled in `ratio` of periods."""
        with self._lock:
            self._throttling[app] = ratio

    def silence(self, pod: str) -> None:
        """Stop measuring the running pod for good: the exporter loses its GPUs, so their series vanish
        with the pod's (not the pod going away: then its GPUs stay reported, free)."""
        with self._lock:
            self._silenced.add(pod)

    def when(self, condition: Callable[[], bool], then: Callable[[], None]) -> None:
        """Run `then` once, at the first sync where `condition()` holds (e.g. demand served by an action)."""
        with self._lock:
            self._triggers.append((condition, then))

    def reported(self) -> dict[str, tuple[str, int, float]]:
        """What the exporter reports now: pod -> (container, GPUs, utilization)."""
        with self._lock:
            return dict(self._reported)

    # --- the sync ---

    def sync(self) -> None:
        self._fire_triggers()
        with self._lock:
            demand, silenced = dict(self._demand), set(self._silenced)
        replicas = {app: self._replicas(d) for app, d in demand.items()}
        wanted: dict[str, tuple[str, int, float]] = {}
        apps: dict[str, str] = {}
        mig: dict[str, str | None] = {}
        for pod in self.sim.list("pods", self.namespace):
            app = (pod["metadata"].get("labels") or {}).get("app", "")
            name = pod["metadata"]["name"]
            if app not in demand or name in silenced or not _running(pod):
                continue
            container, gpus = _gpu_container(pod)
            if gpus:
                wanted[name] = (container, gpus, _utilization(demand[app].demand, replicas[app], gpus))
                apps[name] = app
                mig[name] = demand[app].mig_profile
        for name in set(self._reported) - set(wanted):
            if name in silenced:
                self.exporter.lose_pod_gpus(self.namespace, name)
            else:
                self.exporter.remove_pod(self.namespace, name)
        for name, (container, gpus, utilization) in sorted(wanted.items()):
            if self._reported.get(name) != (container, gpus, utilization) or self._mig.get(name) != mig[name]:
                self.exporter.set_pod(self.namespace, name, container, gpus=gpus, utilization=utilization,
                                      mig_profile=mig[name])
        self._sync_cadvisor(wanted, apps)
        with self._lock:
            self._reported, self._mig = wanted, mig

    def _sync_cadvisor(self, wanted: dict[str, tuple[str, int, float]], apps: dict[str, str]) -> None:
        """cAdvisor measures every running container the exporter reports, throttled or not."""
        if self.cadvisor is None:
            return
        with self._lock:
            throttling = dict(self._throttling)
        for name in set(self._reported) - set(wanted):
            self.cadvisor.remove_pod(self.namespace, name)
        for name, (container, _gpus, _util) in wanted.items():
            self.cadvisor.set_container(self.namespace, name, container, throttling=throttling.get(apps[name], 0.0))

    def _fire_triggers(self) -> None:
        with self._lock:
            triggers = list(self._triggers)
        for trigger in triggers:
            condition, then = trigger
            if condition():
                then()
                with self._lock:
                    self._triggers.remove(trigger)

    def _replicas(self, demand: WorkloadDemand) -> int:
        obj = self.sim.get(demand.resource, self.namespace, demand.name)
        return max(1, int(obj["spec"].get("replicas", 1)))

    def start(self, interval: float = 0.1) -> ClusterMirror:
        self.sync()
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="cluster-mirror", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.sync()
            except Exception:  # noqa: BLE001 - a test thread must not die silently; the test reads `errors`
                self.errors.append(traceback.format_exc())


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _gpu_container(pod: Mapping[str, Any]) -> tuple[str, int]:
    """The pod's GPU container (these workloads have one) and its GPUs."""
    for container in pod["spec"]["containers"]:
        gpus = int(((container.get("resources") or {}).get("limits") or {}).get(GPU, 0))
        if gpus:
            return container["name"], gpus
    return "", 0


def _utilization(demand: float, replicas: int, gpus: int) -> float:
    """Each replica carries an equal share of the demand over its GPUs; whole percent, as DCGM reports."""
    return round(min(1.0, demand / (replicas * gpus)), 2)
