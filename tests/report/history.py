"""A cluster's history, written as Prometheus would have scraped it, for `reactor report` to read back.

The workloads are Deployments seeded into the embedded cluster (`SEEDS`), so their pods carry the names and owner
references a controller gives them, and `reactor plan` can be asked about the same pods. Their series are written
as dcgm-exporter's (one series per GPU with `gpu`, `UUID`, `modelName`, `Hostname`, the workload's
`exported_namespace`/`exported_pod`/`exported_container` and the exporter's own target labels, job
`dcgm-exporter`, as NVIDIA's chart's ServiceMonitor scrapes it with honorLabels false) and kube-state-metrics'
(`kube_pod_owner`, `kube_replicaset_owner` as kube-state-metrics v2 `internal/store/pod.go`
createPodOwnerFamilyGenerator and `replicaset.go` build them; `kube_resourcequota` and `kube_limitrange` as
`resourcequota.go` and `limitrange.go` do) and the kubelet's cAdvisor CFS counters (`container_cpu_cfs_periods_total`,
`container_cpu_cfs_throttled_periods_total`, labelled namespace/pod/container), in OpenMetrics text for
`promtool tsdb create-blocks-from openmetrics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
HOURS = 4
RESOLUTION = 30  # seconds between samples, as dcgm-exporter collects
END = T0 + timedelta(hours=HOURS)
NAMESPACE = "ml"
OTHER_NAMESPACE = "lab"  # no kube-state-metrics series there: grouped by pod name
A100_40 = "NVIDIA A100-SXM4-40GB"
FB_TOTAL_MIB = 40960
EXPORTER = {"job": "dcgm-exporter", "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-abcde",
            "container": "nvidia-dcgm-exporter", "instance": "10.0.0.9:9400"}
QUOTA_HARD = 13  # the workloads hold 12: one GPU of headroom, which a rolling shrink needs for its surge pod
GAP = (T0 + timedelta(minutes=90), T0 + timedelta(minutes=110))  # the `gap` workload's exporter was not scraped
MOVE_AT = T0 + timedelta(hours=2)  # the `mover` pod ends on node-a; its replacement starts on node-b 5 minutes on
MOVED_START = MOVE_AT + timedelta(minutes=5)


def _burst(t: float) -> float:
    """20 minutes at 0, 10 at 1: a median of 0, yet no 30-minute window averages under 30 %."""
    return 1.0 if (t - T0.timestamp()) % 1800 >= 1200 else 0.0


@dataclass(frozen=True)
class Shape:
    """One Deployment of the seeds: GPUs per pod, its utilization over time, framebuffer used (MiB)."""

    name: str
    gpus: int
    utilization: Callable[[float], float]
    fb_mib: float = 1000.0
    namespace: str = NAMESPACE


WORKLOADS = (
    Shape("idle", 2, lambda t: 0.0),
    Shape("under", 4, lambda t: 0.2),
    Shape("saturated", 2, lambda t: 0.99, fb_mib=30000),
    Shape("bursty", 1, _burst, fb_mib=20000),
    Shape("migable", 1, lambda t: 0.1, fb_mib=3000),
    Shape("mover", 1, lambda t: 0.5),
    Shape("gap", 1, lambda t: 0.5),
)
LAB = Shape("trainer", 1, lambda t: 0.5, namespace=OTHER_NAMESPACE)


def seeds() -> str:
    """The embedded cluster's manifests: two 8-GPU nodes, namespace `ml` with a GPU quota the workloads fill
    and a LimitRange of 1-4 GPUs per container, and one Deployment per `WORKLOADS` entry."""
    docs = [f"""apiVersion: v1
kind: Node
metadata: {{name: {node}, labels: {{kubernetes.io/hostname: {node}}}}}
status:
  capacity: {{cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}}
  allocatable: {{cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}}
  conditions: [{{type: Ready, status: "True", reason: KubeletReady, message: ready}}]"""
            for node in ("node-a", "node-b")]
    docs += [f"""apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}""", f"""apiVersion: v1
kind: ResourceQuota
metadata: {{name: gpu-quota, namespace: {NAMESPACE}}}
spec:
  hard: {{requests.nvidia.com/gpu: "{QUOTA_HARD}"}}""", f"""apiVersion: v1
kind: LimitRange
metadata: {{name: gpu-limits, namespace: {NAMESPACE}}}
spec:
  limits:
  - type: Container
    min: {{nvidia.com/gpu: "1"}}
    max: {{nvidia.com/gpu: "4"}}"""]
    for w in WORKLOADS:
        docs.append(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {w.name}, namespace: {w.namespace}, labels: {{app: {w.name}}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {w.name}}}}}
  template:
    metadata: {{labels: {{app: {w.name}}}}}
    spec:
      containers:
      - name: main
        image: registry.example.com/{w.name}:1
        resources:
          requests: {{nvidia.com/gpu: "{w.gpus}"}}
          limits: {{nvidia.com/gpu: "{w.gpus}"}}""")
    return "\n---\n".join(docs) + "\n"


POLICY = f"""namespaces: {{allow: [{NAMESPACE}]}}
targetUtilization: 0.6
cooldown: 30m
reverseAfter: 2h
"""


@dataclass(frozen=True)
class Pod:
    """A pod as the cluster named it: its Deployment's shape, its ReplicaSet, the node and when it ran."""

    shape: Shape
    name: str
    replicaset: str
    node: str
    start: datetime = T0
    end: datetime = END


@dataclass
class Family:
    name: str
    samples: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, labels: dict[str, str], t: float, value: float) -> None:
        self.samples.setdefault(tuple(sorted(labels.items())), []).append((t, value))


def pods_of(cluster_pods: list[dict[str, object]]) -> list[Pod]:
    """The history's pods from the cluster's (name, ReplicaSet from ownerReferences); the mover gets a second
    pod of the same ReplicaSet on the other node after MOVE_AT, the lab's trainer a name of its own."""
    found = []
    shapes = {w.name: w for w in WORKLOADS}
    for p in cluster_pods:
        meta = p["metadata"]
        assert isinstance(meta, dict)
        owner = meta["ownerReferences"][0]["name"]
        shape = shapes[meta["labels"]["app"]]
        if shape.name == "mover":
            found.append(Pod(shape, meta["name"], owner, "node-a", end=MOVE_AT))
            found.append(Pod(shape, f"{owner}-zz9zz", owner, "node-b", start=MOVED_START))
        else:
            found.append(Pod(shape, meta["name"], owner, "node-a" if len(found) % 2 else "node-b"))
    found.append(Pod(LAB, "trainer-5f6d7b8c9d-xw2kq", "trainer-5f6d7b8c9d", "node-c"))
    return found


def times(start: datetime, end: datetime) -> Iterator[float]:
    t = start.timestamp()
    while t <= end.timestamp():
        yield t
        t += RESOLUTION


def _scraped(pod: Pod, t: float) -> bool:
    return not (pod.shape.name == "gap" and GAP[0].timestamp() <= t < GAP[1].timestamp())


def openmetrics(pods: list[Pod]) -> str:
    families = {n: Family(n) for n in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                                       "DCGM_FI_DEV_FB_FREE", "kube_pod_owner", "kube_replicaset_owner",
                                       "kube_pod_info", "kube_resourcequota", "kube_limitrange",
                                       "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total")}
    gpu_index = 0
    for pod in pods:
        for g in range(pod.shape.gpus):
            gpu_index += 1
            uuid = f"GPU-{gpu_index:04d}-{pod.name}"
            labels = {**EXPORTER, "gpu": str(g), "UUID": uuid, "device": f"nvidia{g}", "modelName": A100_40,
                      "Hostname": pod.node, "pci_bus_id": f"00000000:{g:02x}:00.0",
                      "exported_namespace": pod.shape.namespace, "exported_pod": pod.name, "exported_container": "main"}
            for t in times(pod.start, pod.end - timedelta(seconds=RESOLUTION) if pod.end < END else END):
                if not _scraped(pod, t):
                    continue
                u = pod.shape.utilization(t)
                families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].add(labels, t, u)
                families["DCGM_FI_DEV_GPU_UTIL"].add(labels, t, round(u * 100))
                families["DCGM_FI_DEV_FB_USED"].add(labels, t, pod.shape.fb_mib)
                families["DCGM_FI_DEV_FB_FREE"].add(labels, t, FB_TOTAL_MIB - pod.shape.fb_mib)
            if pod.end < END:  # the GPU stays, free: the exporter keeps reporting it without a pod
                free = {k: v for k, v in labels.items() if not k.startswith("exported_")}
                for t in times(pod.end, END):
                    families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].add(free, t, 0.0)
                    families["DCGM_FI_DEV_FB_USED"].add(free, t, 0.0)
        if pod.shape.namespace != NAMESPACE:
            continue  # no kube-state-metrics there
        if pod.shape.name != "migable":  # cAdvisor as the kubelet exports it: 100 ms CFS periods, none throttled
            kubelet = {"job": "kubelet", "metrics_path": "/metrics/cadvisor", "instance": pod.node,
                       "namespace": pod.shape.namespace, "pod": pod.name, "container": "main"}
            for t in times(pod.start, pod.end):
                families["container_cpu_cfs_periods_total"].add(kubelet, t, 10 * (t - pod.start.timestamp()))
                families["container_cpu_cfs_throttled_periods_total"].add(kubelet, t, 0)
        ksm = {"job": "kube-state-metrics", "instance": "10.0.0.8:8080", "namespace": NAMESPACE}
        for t in times(pod.start, pod.end):
            families["kube_pod_owner"].add({**ksm, "pod": pod.name, "uid": f"uid-{pod.name}",
                                            "owner_kind": "ReplicaSet", "owner_name": pod.replicaset,
                                            "owner_is_controller": "true"}, t, 1)
            families["kube_replicaset_owner"].add({**ksm, "replicaset": pod.replicaset, "owner_kind": "Deployment",
                                                   "owner_name": pod.shape.name, "owner_is_controller": "true"}, t, 1)
            families["kube_pod_info"].add({**ksm, "pod": pod.name, "uid": f"uid-{pod.name}", "node": pod.node,
                                           "priority_class": "", "created_by_kind": "ReplicaSet",
                                           "created_by_name": pod.replicaset}, t, 1)
    ksm = {"job": "kube-state-metrics", "instance": "10.0.0.8:8080", "namespace": NAMESPACE}
    used = sum(w.gpus for w in WORKLOADS)
    for t in times(T0, END):
        for kind, value in (("hard", QUOTA_HARD), ("used", used)):
            families["kube_resourcequota"].add({**ksm, "resourcequota": "gpu-quota",
                                                "resource": "requests.nvidia.com/gpu", "type": kind}, t, value)
        for constraint, value in (("min", 1), ("max", 4)):
            families["kube_limitrange"].add({**ksm, "limitrange": "gpu-limits", "resource": "nvidia.com/gpu",
                                             "type": "Container", "constraint": constraint}, t, value)
    return _text(families.values())


def _text(families: Iterator[Family] | object) -> str:
    lines = []
    for family in families:  # type: ignore[attr-defined]
        kind = "counter" if family.name.endswith("_total") else "gauge"
        lines.append(f"# TYPE {family.name.removesuffix('_total') if kind == 'counter' else family.name} {kind}")
        for labels, samples in sorted(family.samples.items()):
            inner = ",".join(f'{k}="{v}"' for k, v in labels)
            for t, v in sorted(samples):
                lines.append(f"{family.name}{{{inner}}} {_number(v)} {t:.0f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _number(v: float) -> str:
    return "NaN" if math.isnan(v) else f"{v:g}"
