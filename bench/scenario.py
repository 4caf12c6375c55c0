"""The bench's cluster, policy and notifications: GPU namespaces at storm scale, built reproducibly.

`team-0` … `team-4`: 10 Deployments of 20 pods each (1,000 pods of 8 GPUs); each pod fires
`GPUUnderutilized` on each of its 8 GPUs and `GPUIdle` on 2 of them (an extra `gpu` label), so
the storm is 10,000 alerts on 1,000 pods and 50 workloads. `latency-0` … `latency-9`: 200
one-pod Deployments of 2 GPUs, one per latency run, so no run meets a workload in cooldown
(spread over namespaces because the simulator's Deployment controller is quadratic per namespace).
The pods run on Ready GPU nodes of 64 GPUs, half again as many GPUs as the pods hold (room for every
rollout's surge): bigger than real 8-GPU machines so that the simulator's scheduler has fewer nodes to
scan; the bench measures the reactor, not placement.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from reactor.tools.payloads import AlertSpec, notification, rfc3339
from reactor.tools.prometheus_api import PrometheusStandIn
from reactor_sim import SimCluster

GPU = "nvidia.com/gpu"
TEAMS = tuple(f"team-{i}" for i in range(5))
DEPLOYMENTS_PER_TEAM = 10
REPLICAS = 20
GPUS_PER_POD = 8
IDLE_GPUS = 2  # GPUs per pod that also fire GPUIdle
LATENCY_NAMESPACES = tuple(f"latency-{i}" for i in range(10))
LATENCY_WORKLOADS = 200
CONTAINER = "server"
RULES_INTERVAL = timedelta(minutes=1)  # the shipped rules' group interval: the stand-in evaluates as often
QUOTA = 4000  # requests.nvidia.com/gpu per namespace: far above the 1,600 in use, room for any surge
NODE_GPUS = 64
LEASE_NAMESPACE = "gpu-reactor"

# Enough budget that all 50 storm workloads and the 200 latency workloads may act: the storm
# measures API economy when every workload changes; a smaller budget would hide writes (each
# budget-limited workload is reported). The rate limit is raised so that it does not decide
# the webhook's throughput: the production default (20 QPS, burst 40) is reported separately.
POLICY: dict[str, Any] = {
    "namespaces": {"allow": [*TEAMS, *LATENCY_NAMESPACES]},
    "targetUtilization": 0.6,
    "cooldown": "30m",
    "reverseAfter": "2h",
    "budget": {"global": {"actions": 1000, "per": "10m"}, "namespace": {"actions": 500, "per": "10m"}},
    "server": {"maxBodyBytes": 16 << 20},
    "kube": {"qps": 5000, "burst": 5000, "watchCache": True},
    "logging": {"format": "json", "level": "INFO"},
}


@functools.cache
def prometheus() -> PrometheusStandIn:
    """The stand-in for Prometheus's API the bench's reactors confirm alerts against (docs/confirm.md): the bench's
    notifications stand for genuine ones, so the rules fire what `body` builds. One per process, started on first
    use; its answer lists every alert the bench made fire, as a real Prometheus's lists every active alert, and its
    group evaluates every minute, as the shipped rules' group does (rules/gpu-reactor.rules.yaml `interval: 1m`), so
    the reactor reuses an answer until the next evaluation as it would against Prometheus."""
    return PrometheusStandIn(evaluates=RULES_INTERVAL).start()


def confirm() -> dict[str, Any]:
    """The policy's `confirm` section: the stand-in's URL."""
    return {"prometheusUrl": prometheus().url}


def policy_yaml(**overrides: Any) -> str:
    doc = json.loads(json.dumps(POLICY))
    doc["confirm"] = confirm()
    doc.update(overrides)
    return str(yaml.safe_dump(doc, sort_keys=False))


def deployment(namespace: str, name: str, replicas: int, gpus: int) -> dict[str, Any]:
    limits = {GPU: str(gpus)}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "priorityClassName": "medium-priority-gpu",
                "containers": [{"name": CONTAINER, "image": "registry.example.com/llm-server:1.4",
                                "resources": {"limits": limits, "requests": dict(limits)}}]}},
        },
    }


def manifests(*, replicas: int = REPLICAS, latency_workloads: int = LATENCY_WORKLOADS,
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(objects, quotas): quotas are applied after the pods exist (see `build_cluster`)."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in (("medium-priority-gpu", 50000), ("high-priority-gpu", 100000))
    ]
    # The reactor's own namespace, where its verifier Lease lives (verify.leaseNamespace), as in an install.
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}})
    quotas = []
    for ns in (*TEAMS, *LATENCY_NAMESPACES[:latency_workloads]):
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        docs.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "gpu-limits", "namespace": ns},
                     "spec": {"limits": [{"type": "Container", "min": {GPU: "1"}, "max": {GPU: "8"}}]}})
        quotas.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
                       "spec": {"hard": {f"requests.{GPU}": str(QUOTA)}}})
    for ns in TEAMS:
        docs += [deployment(ns, f"model-{d}", replicas, GPUS_PER_POD) for d in range(DEPLOYMENTS_PER_TEAM)]
    docs += [deployment(*latency_workload(i), 1, 2) for i in range(latency_workloads)]
    gpus = len(TEAMS) * DEPLOYMENTS_PER_TEAM * replicas * GPUS_PER_POD + latency_workloads * 2
    docs += [gpu_node(f"gpu-node-{i:03d}") for i in range(math.ceil(gpus * 1.5 / NODE_GPUS))]
    return docs, quotas


def gpu_node(name: str) -> dict[str, Any]:
    """A GPU node that has reported Ready (the simulator's scheduler binds pods only to Nodes that fit)."""
    room = {"cpu": "256", "memory": "2Ti", "pods": "110", GPU: str(NODE_GPUS)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": room, "allocatable": dict(room),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


# How often kube-apiserver's watch cache sends each watcher a BOOKMARK: `defaultBookmarkFrequency = time.Minute`
# (k8s.io/apiserver/pkg/storage/cacher; its `eventFreshDuration`, 75 s, is that plus 15 s). The embedded cluster
# sends one every second by default, so that tests see them; the bench's reactor watches 121 streams, and 121
# wake-ups a second are a load the real server does not put on it.
BOOKMARK_SECONDS = 60.0


def start_sim() -> SimCluster:
    """The embedded cluster (it sets TCP_NODELAY like kube-apiserver, so no delayed-ACK stalls), sending BOOKMARKs
    at kube-apiserver's pace."""
    sim = SimCluster().start()
    sim.set_bookmark_interval(BOOKMARK_SECONDS)
    return sim


def build_cluster(sim: SimCluster, *, replicas: int = REPLICAS, latency_workloads: int = LATENCY_WORKLOADS) -> None:
    """Seed and settle, the quotas in place before the first pod (the simulator keeps quota usage incrementally)."""
    docs, quotas = manifests(replicas=replicas, latency_workloads=latency_workloads)
    sim.apply([d for d in docs if d["kind"] != "Deployment"])
    sim.apply(quotas)
    sim.apply([d for d in docs if d["kind"] == "Deployment"])
    sim.settle()


def latency_workload(i: int) -> tuple[str, str]:
    """(namespace, name) of the i-th latency Deployment."""
    return LATENCY_NAMESPACES[i % len(LATENCY_NAMESPACES)], f"svc-{i:03d}"


@dataclass(frozen=True)
class Fleet:
    """The running pods per team namespace, sorted by name (their Deployment names start them)."""

    pods: dict[str, list[str]]

    @classmethod
    def read(cls, sim: SimCluster, namespaces: Iterable[str] = TEAMS) -> Fleet:
        return cls({ns: sorted(p["metadata"]["name"] for p in sim.list("pods", ns)) for ns in namespaces})

    def all(self) -> list[tuple[str, str]]:
        return [(ns, pod) for ns, pods in self.pods.items() for pod in pods]


def pod_alerts(namespace: str, pod: str, starts_at: datetime) -> list[AlertSpec]:
    """What the rules fire for one wasteful 8-GPU pod: per-GPU GPUUnderutilized, and GPUIdle on the idle ones."""
    specs = [AlertSpec("GPUUnderutilized", namespace, pod, CONTAINER, 0.25 if g < GPUS_PER_POD - IDLE_GPUS else 0.0,
                       GPUS_PER_POD, starts_at=starts_at, extra_labels={"gpu": str(g)}) for g in range(GPUS_PER_POD)]
    specs += [AlertSpec("GPUIdle", namespace, pod, CONTAINER, 0.0, GPUS_PER_POD, starts_at=starts_at,
                        extra_labels={"gpu": str(g)}) for g in range(GPUS_PER_POD - IDLE_GPUS, GPUS_PER_POD)]
    return specs


def body(specs: list[AlertSpec]) -> bytes:
    """Compact JSON of a notification grouped as a route with `group_by: [namespace]` would; the rules fire its
    alerts (the Prometheus stand-in is told)."""
    doc = notification(specs, group_by=("namespace",))
    prometheus().observe(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def storm_body(fleet: Fleet, starts_at: datetime) -> bytes:
    return body([s for ns, pod in fleet.all() for s in pod_alerts(ns, pod, starts_at)])


def webhook_bodies(fleet: Fleet, size: int, count: int, first: datetime) -> list[bytes]:
    """`count` notifications of `size` alerts each (1, or a multiple of the 10 alerts per pod), each a new firing.

    Body k takes consecutive pods of the k-th namespace (round robin), so a notification names few workloads as
    Alertmanager's per-namespace grouping would; every body has its own `startsAt`.
    """
    out = []
    per_pod = GPUS_PER_POD + IDLE_GPUS
    namespaces = list(fleet.pods)
    for k in range(count):
        ns = namespaces[k % len(namespaces)]
        pods = fleet.pods[ns]
        starts_at = first + timedelta(seconds=k)
        if size == 1:
            out.append(body(pod_alerts(ns, pods[(k * 7) % len(pods)], starts_at)[:1]))
            continue
        if size % per_pod:
            raise ValueError(f"size {size} is not a multiple of {per_pod}")
        n = size // per_pod
        start = (k // len(namespaces) * n) % max(1, len(pods) - n + 1)
        out.append(body([s for pod in pods[start:start + n] for s in pod_alerts(ns, pod, starts_at)]))
    return out


def restamp(raw: bytes, old: datetime, new: datetime) -> bytes:
    """The same notification as a new firing: every `startsAt` moved from `old` to `new`."""
    return raw.replace(f'"startsAt":"{rfc3339(old)}"'.encode(), f'"startsAt":"{rfc3339(new)}"'.encode())


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
