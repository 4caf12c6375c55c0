"""The wired pipeline the end-to-end tests drive, and what they read back from it.

fake dcgm-exporter (mirroring the cluster's pods) → Prometheus (FAST rules) → Alertmanager (the
deploy/ route) → webhook sink (records, relays) → `reactor serve` → embedded cluster.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from reactor_sim import SimCluster
from tests.e2e.mirror import ClusterMirror
from tests.e2e.reactor_process import ReactorProcess
from tests.promstack.stack import Delivery, PromStack, WebhookSink

NAMESPACE = "ml-workloads"
GPU = "nvidia.com/gpu"
ANNOTATION = "gpu-reactor.io/"
T = TypeVar("T")

# Short timers, so several actions fit in one session; otherwise the documented defaults.
POLICY: dict[str, Any] = {
    "namespaces": {"allow": [NAMESPACE]},
    "targetUtilization": 0.6,
    "cooldown": "5s",
    "reverseAfter": "5s",
    "revertAfter": "0s",
    "revert": ["set-priority-up"],  # the default, spelled out: scenario 3 relies on it
    "budget": {"global": {"actions": 100, "per": "1m"}, "namespace": {"actions": 100, "per": "1m"}},
    "logging": {"format": "text", "level": "INFO"},
}

# The rebalance case's own namespace (tests/e2e/rebalance.yaml: one full 8-GPU quota, a training donor and an
# inference receiver), kept apart so the scenarios above never meet its quota or its alerts.
REBALANCE_NAMESPACE = "ml-rebalance"
DONOR_ALERTS = ("GPUUnderutilized", "GPUIdle")  # rebalance.donorAlerts' default

# Donate on demand: the rebalance namespace's idle alerts go to Alertmanager's default receiver (no integration),
# not to the reactor. They stay active in Alertmanager (neither silenced nor inhibited), where the reactor's
# rebalance asks for them, but their own notification never shrinks the donor: its GPUs move only when a
# receiver of the same quota needs them (see tests/e2e/test_rebalance_pipeline.py for why).
DONOR_ON_DEMAND_ROUTE: dict[str, Any] = {
    "receiver": "default",
    "matchers": ['reactor="gpu"', f'namespace="{REBALANCE_NAMESPACE}"', f'alertname=~"{"|".join(DONOR_ALERTS)}"'],
    "continue": False,
}


def with_rebalance(policy: dict[str, Any], alertmanager_url: str) -> dict[str, Any]:
    """`policy` with rebalancing on, asking the stack's real Alertmanager, and the rebalance namespace allowed."""
    allow = [*policy["namespaces"]["allow"], REBALANCE_NAMESPACE]
    return {**policy, "namespaces": {**policy["namespaces"], "allow": allow},
            "rebalance": {"enabled": True, "alertmanagerUrl": alertmanager_url}}


# GPU-equivalents of work per workload at rest: every GPU between the alert thresholds (0.30-0.95).
NORMAL = {
    "llm-inference": ("deployments", "llm-inference", 4.96),  # 2 pods x 4 GPUs at 0.62
    "chat": ("deployments", "chat", 0.60),  # 1 pod x 1 GPU at 0.60
    "trainer": ("statefulsets", "trainer", 2.40),  # 2 pods x 2 GPUs at 0.60
    "burst": ("deployments", "burst", 0.50),  # 1 pod x 1 GPU at 0.50
    "embedder": ("deployments", "embedder", 1.00),  # 2 pods x 1 GPU at 0.50
    "loader": ("deployments", "loader", 0.50),  # 1 pod x 1 GPU at 0.50 (the CPU half)
    "sizer": ("deployments", "sizer", 2.48),  # 1 pod x 4 GPUs at 0.62 (the confirm scenarios)
}


def with_confirm(policy: dict[str, Any], prometheus_url: str) -> dict[str, Any]:
    """`policy` confirming every alert against the stack's real Prometheus (docs/confirm.md)."""
    return {**policy, "confirm": {"prometheusUrl": prometheus_url, "timeout": "2s"}}


@dataclass(frozen=True)
class Delay:
    """One measured path through the pipeline, in seconds from the metric change."""

    scenario: str
    webhook: float  # change -> first notification carrying the alert reached the reactor
    answered: float  # change -> the reactor answered that notification
    applied: float | None  # change -> the change was seen on the workload (None: no change expected)

    def line(self) -> str:
        applied = "-" if self.applied is None else f"{self.applied:5.1f} s (webhook + {self.applied - self.webhook:.1f} s)"
        return f"{self.scenario:<50} webhook {self.webhook:5.1f} s   answered {self.answered:5.1f} s   applied {applied}"


DELAYS: list[Delay] = []


class GenerationWatch:
    """When each workload's spec changed: the first time each `metadata.generation` was seen (every 50 ms), and
    the object as it was then — a change the reactor reverts seconds later stays visible to a test that looks late."""

    def __init__(self, sim: SimCluster, resources: tuple[str, ...] = ("deployments", "statefulsets")) -> None:
        self.sim, self.resources = sim, resources
        self.seen: dict[tuple[str, str, int], float] = {}
        self.objects: dict[tuple[str, str, int], dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="generation-watch", daemon=True)

    def start(self) -> GenerationWatch:
        self._poll()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def changed_at(self, resource: str, name: str, generation: int) -> float | None:
        return self.seen.get((resource, name, generation))

    def first(self, resource: str, name: str, check: Callable[[dict[str, Any]], bool]) -> tuple[float, dict[str, Any]] | None:
        """The first generation of the workload for which `check(object)` held: (when it was seen, the object)."""
        for key, obj in sorted(self.objects.items(), key=lambda kv: kv[0][2]):
            if key[:2] == (resource, name) and check(obj):
                return self.seen[key], obj
        return None

    def _poll(self) -> None:
        now = time.monotonic()
        for resource in self.resources:
            for obj in self.sim.list(resource, NAMESPACE):
                key = (resource, obj["metadata"]["name"], obj["metadata"]["generation"])
                if key not in self.seen:
                    self.objects[key] = copy.deepcopy(obj)
                    self.seen[key] = now

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self._poll()
            except Exception:  # noqa: BLE001 - the sim stopping under us at the end; nothing to report
                return


@dataclass
class Pipeline:
    sim: SimCluster
    mirror: ClusterMirror
    reactor: ReactorProcess
    sink: WebhookSink
    stack: PromStack
    watch: GenerationWatch

    # --- the cluster ---

    def workload(self, resource: str, name: str) -> dict[str, Any]:
        return self.sim.get(resource, NAMESPACE, name)

    def pods(self, app: str) -> list[str]:
        pods = self.sim.list("pods", NAMESPACE, label_selector=f"app={app}")
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def patches(self) -> dict[str, int]:
        """PATCH requests the API server answered, by resource (the reactor is the only HTTP writer)."""
        return {resource: n for (verb, resource, _sub), n in self.sim.requests.items() if verb == "patch"}

    # --- waiting ---

    def wait(self, probe: Callable[[], T | None], *, timeout: float, what: str, every: float = 0.05) -> T:
        """`probe()`'s first truthy value; an AssertionError that shows the pipeline's state after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:.0f} s\n{self.diagnostics()}")
            time.sleep(every)

    def delivery(self, match: Callable[[Delivery], bool], *, timeout: float, what: str) -> Delivery:
        return self.wait(lambda: next((d for d in list(self.sink.deliveries) if match(d)), None), timeout=timeout, what=what,
                         every=0.1)

    def diagnostics(self) -> str:
        alerts = sorted(
            (a["labels"].get("alertname", ""), a["labels"].get("pod", ""), a["status"]["state"]) for a in _safe(self.stack.alerts)
        )
        lines = [f"alertmanager alerts: {alerts}", f"exporter: {self.mirror.reported()}",
                 f"patches: {self.patches()}", f"deliveries: {len(self.sink.deliveries)}"]
        for d in self.sink.deliveries[-5:]:
            lines.append(f"  {summary(d)}")
        if self.mirror.errors:
            lines.append("mirror errors:\n" + self.mirror.errors[-1])
        lines.append("reactor log:\n" + self.reactor.tail())
        return "\n".join(lines)


# --- reading notifications and answers ---


def alerts_in(delivery: Delivery, alertname: str, status: str, pods: Iterable[str]) -> list[dict[str, Any]]:
    wanted = set(pods)
    return [a for a in delivery.body.get("alerts", [])
            if a["labels"].get("alertname") == alertname and a["status"] == status and a["labels"].get("pod") in wanted]


def outcomes_for(delivery: Delivery, alertname: str, status: str, pods: Iterable[str]) -> list[dict[str, Any]]:
    """The reactor's per-alert outcomes in its answer to `delivery`, for these alerts."""
    wanted = set(pods)
    answer = delivery.answer if isinstance(delivery.answer, dict) else {}
    return [o for o in answer.get("outcomes", [])
            if o.get("alert") == alertname and o.get("status") == status and o.get("pod") in wanted]


def summary(delivery: Delivery) -> str:
    alerts = [(a["labels"].get("alertname"), a["labels"].get("pod"), a["status"]) for a in delivery.body.get("alerts", [])]
    outcomes = [(o.get("pod"), o.get("result"), o.get("action") or o.get("reason")) for o in
                (delivery.answer or {}).get("outcomes", [])] if isinstance(delivery.answer, dict) else delivery.answer
    return f"{delivery.status} {alerts} -> {outcomes}"


def last_action(obj: dict[str, Any]) -> dict[str, Any] | None:
    raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION + "last-action")
    return json.loads(raw) if raw else None


def gpus(obj: dict[str, Any], container: str) -> tuple[str | None, str | None]:
    """(limit, request) of the GPU resource in the pod template's container."""
    (c,) = [c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == container]
    resources = c.get("resources") or {}
    return (resources.get("limits") or {}).get(GPU), (resources.get("requests") or {}).get(GPU)


def _safe(read: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    try:
        return read()
    except OSError:
        return []
