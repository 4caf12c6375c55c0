"""The policy as a value: what the reactor may do, and how eagerly.

Data and the one predicate over it (`namespace_allowed`); the pure decision reads it. Reading it
from a file and the environment is configuration's job (`reactor.config.settings`), never done here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from reactor.core.model import Mode

STRATEGIES = frozenset(
    {
        "resize-gpu-down",
        "resize-gpu-up",
        "scale-replicas-down",
        "scale-replicas-up",
        "set-priority-down",
        "set-priority-up",
        "hold",
        "resize-cpu-up",
        "resize-memory-up",
    }
)
REVERTIBLE = frozenset({"set-priority-up", "set-priority-down", "scale-replicas-up", "resize-gpu-up", "resize-cpu-up",
                        "resize-memory-up"})
# The strategies that resize a running pod in place (pods/resize) unless `cpu.applyTo` is template.
IN_PLACE = frozenset({"resize-cpu-up", "resize-memory-up"})
# Where a CPU change goes: the running pods (in place, pods/resize), the owner's template, or both.
CPU_APPLY_TO = ("pods", "template", "both")
# Denied whatever `namespaces.deny` says; admitted only when `namespaces.allow` names them (never by `*`).
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})

DEFAULT_ALERTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "GPUUnderutilized": ("resize-gpu-down", "set-priority-down"),
        "GPUIdle": ("scale-replicas-down", "resize-gpu-down"),
        "GPUSaturated": ("scale-replicas-up", "resize-gpu-up", "set-priority-up"),
        "GPUMemorySaturated": ("resize-gpu-up",),
        "GPUMetricsMissing": ("hold",),
        "GPUStarvedByCPU": ("resize-cpu-up",),
        "GPUContainerNearMemoryLimit": ("resize-memory-up",),
    }
)



@dataclass(frozen=True, slots=True)
class Window:
    """At most `actions` actions per rolling `per`."""

    actions: int
    per: timedelta


@dataclass(frozen=True, slots=True)
class Policy:
    """What the reactor may do, and how eagerly. Read by the pure policy."""

    dry_run: bool = False
    gpu_resource: str = "nvidia.com/gpu"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()  # beside SYSTEM_NAMESPACES, which are denied unless `allow` names them
    default_mode: Mode = Mode.ENFORCE
    target_utilization: float = 0.6
    cooldown: timedelta = timedelta(minutes=30)
    reverse_after: timedelta = timedelta(hours=2)
    revert_after: timedelta = timedelta(minutes=10)
    revert: tuple[str, ...] = ("set-priority-up",)
    min_gpus: int = 1
    max_gpus: int = 8
    min_replicas: int = 1
    max_replicas: int = 10
    budget_global: Window = Window(20, timedelta(minutes=10))
    budget_namespace: Window = Window(5, timedelta(minutes=10))
    priority_ladder: tuple[str, ...] = ("medium-priority-gpu", "high-priority-gpu")
    alerts: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DEFAULT_ALERTS)
    cluster: str | None = None  # this cluster's name: alerts whose `cluster` label names another are skipped
    # The CPU half (see reactor.policy.cpu): a container throttled above this ratio is CPU-bound.
    cpu_throttled_above: float = 0.25
    cpu_unknown_holds: bool = True  # throttling "unknown" (no cAdvisor series) also refuses shrinking
    cpu_step_m: int = 250  # smallest CPU raise, and the grain sizes are rounded up to (millicores)
    cpu_max_m: int = 16_000  # highest CPU limit the reactor sets (millicores)
    cpu_apply_to: str = "pods"  # where CPU and memory changes go (memory: see Context.memory_apply_to)
    # The memory action (see reactor.policy.memory): a raise is `memory_step` of the limit, up to `memory_max_bytes`.
    memory_step: float = 0.25
    memory_max_bytes: int = 256 << 30

    # Verification after acting (reactor/observe/verifier.py): a rollout not done within verify_timeout is reverted,
    # and the same strategy is not tried again on that workload within verify_revert_window.
    verify_timeout: timedelta = timedelta(minutes=10)
    verify_interval: timedelta = timedelta(seconds=15)
    verify_revert_window: timedelta = timedelta(hours=6)
    # FinOps (reactor/observe/finops.py): what one GPU-hour of each extended resource costs, in the team's own currency;
    # with one for `gpu_resource`, the GPU-hours held back are also counted as cost.
    gpu_hourly_cost: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # Rebalancing (reactor/policy/rebalance.py): a saturated workload's growth refused only for lack of GPU quota
    # is met by shrinking an idle, opted-in donor in the same quota scope first. Off by default.
    rebalance_enabled: bool = False
    # The firing alerts whose quota refusal looks for a donor, and the alerts (live in Alertmanager) that show a
    # donor idle.
    rebalance_receiver_alerts: tuple[str, ...] = ("GPUSaturated", "GPUMemorySaturated")
    rebalance_donor_alerts: tuple[str, ...] = ("GPUUnderutilized", "GPUIdle")
    # Who may give, beside the annotation gpu-reactor.io/donor: "true": workloads whose labels match all of these.
    rebalance_donor_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # A donor ranks lower than or equal to the receiver (priority ladder / PriorityClass value) unless this is true.
    rebalance_higher_priority_donors: bool = False

    @property
    def resizes_pods_in_place(self) -> bool:
        """Does some alert raise CPU or memory on the running pods (pods/resize)? The RBAC grant follows this."""
        return self.cpu_apply_to != "template" and any(IN_PLACE & set(s) for s in self.alerts.values())

    def namespace_allowed(self, namespace: str) -> bool:
        """Deny wins; `*` in allow admits every namespace not denied and not a system namespace.

        Setting `deny` does not drop the system namespaces: only naming one in `allow` admits it.
        """
        if namespace in self.deny:
            return False
        if namespace in SYSTEM_NAMESPACES:
            return namespace in self.allow
        return "*" in self.allow or namespace in self.allow
