"""Which MIG slice would hold a workload: NVIDIA's profile table per GPU model, and the smallest fit.

Pure. The table is the "Supported MIG Profiles" section of NVIDIA's Multi-Instance GPU User Guide
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): per product, each profile's
fraction of memory and fraction of SMs. A100-SXM4-40GB is the guide's table; for the 80 GB A100 and the H100 80GB the
guide renames the same fractions (1g.10gb … 7g.80gb), and the H200 141GB's are 1g.18gb … 7g.141gb. The `+me` media
profiles have the same memory and SMs as their plain twins and are left out. Read only: nothing is reconfigured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html"
DEFAULT_HEADROOM = 0.2  # a slice must hold the peak plus this share of it


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    memory: Fraction  # of the GPU's memory
    compute: Fraction  # of its SMs


@dataclass(frozen=True, slots=True)
class Model:
    """A GPU model as dcgm-exporter's `modelName` names it, its memory (GiB, nominal) and its profiles."""

    name: str
    pattern: re.Pattern[str]
    memory_gib: int
    profiles: tuple[Profile, ...]


def _profiles(*rows: tuple[str, str, str]) -> tuple[Profile, ...]:
    return tuple(Profile(name, Fraction(mem), Fraction(sm)) for name, mem, sm in rows)


def _ladder(sizes: tuple[int, int, int, int, int, int]) -> tuple[Profile, ...]:
    """The A100/H100/H200 ladder: 1g (1/8 memory), 1g (2/8), 2g (2/8), 3g (4/8), 4g (4/8), 7g (all)."""
    a, b, c, d, e, f = sizes
    return _profiles((f"1g.{a}gb", "1/8", "1/7"), (f"1g.{b}gb", "2/8", "1/7"), (f"2g.{c}gb", "2/8", "2/7"),
                     (f"3g.{d}gb", "4/8", "3/7"), (f"4g.{e}gb", "4/8", "4/7"), (f"7g.{f}gb", "1", "1"))


MODELS: tuple[Model, ...] = (
    Model("A100 40GB", re.compile(r"A100.*40\s*GB", re.I), 40, _ladder((5, 10, 10, 20, 20, 40))),
    Model("A100 80GB", re.compile(r"A100.*80\s*GB", re.I), 80, _ladder((10, 20, 20, 40, 40, 80))),
    Model("H100 80GB", re.compile(r"H100.*80\s*GB", re.I), 80, _ladder((10, 20, 20, 40, 40, 80))),
    Model("H200 141GB", re.compile(r"H200", re.I), 141, _ladder((18, 35, 35, 71, 71, 141))),
)


@dataclass(frozen=True, slots=True)
class Fit:
    """The recommendation: `profile` of `model` holds the peak framebuffer (MiB) and compute (0-1 of the GPU)."""

    model: str
    profile: str
    memory_mib: int
    compute: float
    peak_fb_mib: float
    peak_utilization: float


def model_of(model_name: str) -> Model | None:
    return next((m for m in MODELS if m.pattern.search(model_name)), None)


def smallest_fit(model_name: str, *, peak_fb_mib: float, peak_utilization: float,
                 headroom: float = DEFAULT_HEADROOM) -> Fit | None:
    """The smallest profile (memory first, then SMs) that holds both peaks with `headroom`; None when the model
    has no MIG table here or only the whole GPU holds the workload (a 7g slice saves nothing)."""
    model = model_of(model_name)
    if model is None:
        return None
    need_mib = peak_fb_mib * (1 + headroom)
    need_compute = peak_utilization * (1 + headroom)
    for p in sorted(model.profiles[:-1], key=lambda p: (p.memory, p.compute)):
        memory_mib = int(p.memory * model.memory_gib * 1024)
        if need_mib <= memory_mib and need_compute <= p.compute:
            return Fit(model.name, p.name, memory_mib, float(p.compute), peak_fb_mib, peak_utilization)
    return None
