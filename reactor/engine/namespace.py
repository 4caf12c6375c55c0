"""What one notification learns about a namespace while it decides.

Shared by the engine's notification path (core.py) and its rebalancing steps (rebalancing.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reactor.cluster.workloads import namespace_bounds
from reactor.core.model import Action, Bounds, ComputeBounds
from reactor.resolve.owners import Reader


@dataclass(slots=True)
class Namespace:
    """What one notification learned about a namespace: bounds, and the GPUs, CPU and memory its own actions
    reserved.

    The CPU (memory) bounds are read once per notification, like the GPU's: an in-place resize changes `status.used` at
    once (the watch may deliver it mid-notification), and the reservation must not be counted twice.
    """

    bounds: Bounds | None = None
    reserved: dict[str, int] = field(default_factory=dict)  # quota name -> GPUs
    cpu_bounds: ComputeBounds | None = None
    memory_bounds: ComputeBounds | None = None
    # (quota, resource) -> millicores (cpu lines), bytes (memory lines) or pods (pods, count/pods lines): one map,
    # the resource tells them apart
    compute_reserved: dict[tuple[str, str], int] = field(default_factory=dict)

    def gpu_bounds(self, reader: Reader, namespace: str, gpu_resource: str) -> Bounds:
        """The namespace's GPU bounds, read once per notification, less what its own actions reserved."""
        if self.bounds is None:
            self.bounds = namespace_bounds(reader, namespace, gpu_resource)
        return self.bounds.reserving(self.reserved, self.compute_reserved)

    def reserve(self, action: Action) -> None:
        for name, gpus in action.quota_charges:
            self.reserved[name] = self.reserved.get(name, 0) + gpus
        for key, millis in action.compute_quota_charges:
            self.compute_reserved[key] = self.compute_reserved.get(key, 0) + millis
