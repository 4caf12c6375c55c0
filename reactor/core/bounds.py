"""Immutable values of what a namespace allows: ResourceQuota lines with their scopes, LimitRange bounds, for the
GPU resource and for CPU and memory. Data only (re-exported by model.py, where every layer finds the shared values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class ScopeTerm:
    """One requirement of a ResourceQuota's scope: a `spec.scopes` entry reads as `Exists` on that scope, a
    `scopeSelector` expression as written (`PriorityClass In [high-priority-gpu]`)."""

    scope: str  # "PriorityClass" | "BestEffort" | "NotBestEffort" | "Terminating" | "NotTerminating" | ...
    operator: str = "Exists"  # "In" | "NotIn" | "Exists" | "DoesNotExist"
    values: tuple[str, ...] = ()


class QuotaLine:
    """What a ResourceQuota line gives, of GPUs (`Quota`) or of CPU or memory (`ComputeQuota`): what is left."""

    __slots__ = ()
    hard: int
    used: int

    @property
    def headroom(self) -> int:
        return self.hard - self.used


@dataclass(frozen=True, slots=True)
class Quota(QuotaLine):
    """One ResourceQuota's line for the GPU resource: it counts and limits only the pods all its terms match."""

    name: str
    hard: int
    used: int = 0
    scopes: tuple[ScopeTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the namespace allows, per container and in total (GPU resource only)."""

    min_gpus: int | None = None  # LimitRange min (Container type)
    max_gpus: int | None = None  # LimitRange max (Container type)
    pod_min_gpus: int | None = None  # LimitRange min (Pod type): of the pod's sum (policy/pod.py)
    pod_max_gpus: int | None = None  # LimitRange max (Pod type)
    quotas: tuple[Quota, ...] = ()  # every ResourceQuota with a requests.<gpu> line, by name
    # The class admission gives a pod that names none (the globalDefault PriorityClass), when it matters.
    default_priority_class: str | None = None
    # A LimitRange fills cpu or memory into every container: no pod of the namespace is BestEffort.
    defaults_compute: bool = False
    # Which of "cpu" and "memory" some quota of the namespace has a line for: a GPU or priority change's new pods
    # are charged those lines too, and the decision reads them (ComputeBounds) only where one exists.
    compute_lines: frozenset[str] = frozenset()
    # Every quota's `pods` and `count/pods` line (a new pod counts 1 on each): read with the GPU lines, at no cost.
    pod_quotas: tuple[ComputeQuota, ...] = ()

    def reserving(self, reserved: Mapping[str, int],
                  counted: Mapping[tuple[str, str], int] | None = None) -> Bounds:
        """These bounds with the GPUs earlier actions of the same notification took, quota by quota (by name), and
        the pods they added (`counted`, by `ComputeQuota.key`): `status.used` shows them only once their pods
        exist."""
        counted = counted or {}
        if not any(reserved.get(q.name) for q in self.quotas) and not any(counted.get(q.key) for q in self.pod_quotas):
            return self
        quotas = tuple(replace(q, used=q.used + reserved.get(q.name, 0)) for q in self.quotas)
        pods = tuple(replace(q, used=q.used + counted.get(q.key, 0)) for q in self.pod_quotas)
        return replace(self, quotas=quotas, pod_quotas=pods)


@dataclass(frozen=True, slots=True)
class ComputeQuota(QuotaLine):
    """One ResourceQuota's CPU or memory line, in the resource's unit (millicores, bytes): `requests.cpu` (also
    spelled `cpu`) or `limits.cpu`; `requests.memory` (also `memory`) or `limits.memory`; or its pod count (`pods`:
    pods not yet terminal, `count/pods`: every pod object). Like a GPU `Quota`, it counts and limits only the pods
    all its scope terms match."""

    name: str
    # "requests.cpu" | "cpu" | "limits.cpu" | "requests.memory" | "memory" | "limits.memory" | "pods" | "count/pods"
    resource: str
    hard: int
    used: int = 0
    scopes: tuple[ScopeTerm, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """What a reservation is kept under: one quota may limit requests and limits apart."""
        return self.name, self.resource


@dataclass(frozen=True, slots=True)
class ComputeBounds:
    """What the namespace allows for one compute resource (CPU in millicores, memory in bytes): LimitRange
    min/max and maxLimitRequestRatio per container, and every line of every ResourceQuota for it with its scope.

    Kept apart from `Bounds` (the GPU's) so the CPU half adds to the quota math, never reshapes it.
    """

    lowest: int | None = None  # LimitRange min (Container type)
    highest: int | None = None  # LimitRange max (Container type)
    max_ratio: float | None = None  # LimitRange maxLimitRequestRatio (Container type): limit / request at most
    # The same three of `type: Pod` items, against the pod's summed requests and limits (policy/pod.py).
    pod_lowest: int | None = None
    pod_highest: int | None = None
    pod_max_ratio: float | None = None
    quotas: tuple[ComputeQuota, ...] = ()  # by quota name, then resource
    # What LimitRanger fills into a container that sets no request (no limit) of the resource at admission (the
    # Container items' defaultRequest and default): a new pod is charged quota for them.
    default_request: int | None = None
    default_limit: int | None = None

    def reserving(self, reserved: Mapping[tuple[str, str], int]) -> ComputeBounds:
        """These bounds with the amounts earlier actions of the same notification took, line by line: an
        in-place resize shows in `status.used` only once the quota controller recounts (and the reactor reads
        each namespace's quotas once per notification)."""
        if not any(reserved.get(q.key) for q in self.quotas):
            return self
        quotas = tuple(replace(q, used=q.used + reserved.get(q.key, 0)) for q in self.quotas)
        return replace(self, quotas=quotas)
