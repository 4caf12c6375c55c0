"""The busy signal: which series says how busy a container's GPUs are, globally or per namespace.

Pure string building, no I/O. `gr_engine_active` (default: DCGM_FI_PROF_GR_ENGINE_ACTIVE, else
DCGM_FI_DEV_GPU_UTIL/100 off MIG), `sm_active` (DCGM_FI_PROF_SM_ACTIVE), `gpu_util`
(DCGM_FI_DEV_GPU_UTIL/100: LLM servers can read 100% while idle), or `{expr: PROMQL}`: an
expression yielding a 0-1 busy value per `namespace`, `pod`, `container` (a serving engine's own
metrics, e.g. running requests over capacity). Every alert reads the container series
`gpu_reactor:container_gpu_utilization:ratio`, so the choice changes what every alert measures.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reactor.tools.rules import promql
from reactor.tools.rules.promql import BY_WORKLOAD

GR_ENGINE_ACTIVE = "gr_engine_active"
SM_ACTIVE = "sm_active"
GPU_UTIL = "gpu_util"
NAMED = (GR_ENGINE_ACTIVE, SM_ACTIVE, GPU_UTIL)
# Per-GPU series recorded for a named signal used by some namespace but not globally.
_PER_GPU = {GR_ENGINE_ACTIVE: "gpu_reactor:gpu_gr_engine_active:ratio", SM_ACTIVE: "gpu_reactor:gpu_sm_active:ratio",
            GPU_UTIL: "gpu_reactor:gpu_util:ratio"}


@dataclass(frozen=True, slots=True)
class BusySignal:
    """A named DCGM signal (`name`), or a PromQL expression (`expr`, with `name` "expr")."""

    name: str = GR_ENGINE_ACTIVE
    expr: str = ""


def per_gpu(name: str, scrape: promql.Scrape) -> str:
    """The per-GPU busy ratio of a named signal, labelled by the workload."""
    if name == SM_ACTIVE:
        return promql.unshared(promql.workload_series(lambda m: f"DCGM_FI_PROF_SM_ACTIVE{{{m}}}", scrape))
    if name == GPU_UTIL:
        return promql.unshared(promql.workload_series(lambda m: f'{promql.GPU_UTIL}{{{m}, GPU_I_ID=""}} / 100',
                                                      scrape))
    return promql.gpu_utilization(scrape)  # already without shared GPUs


def global_gpu_signal(signal: BusySignal) -> str:
    """The named signal behind `gpu_reactor:gpu_utilization:ratio` (idle GPUs, freshness): an
    expression is per container, so the GPUs are then measured by the default."""
    return signal.name if signal.name in NAMED else GR_ENGINE_ACTIVE


def _variants(default: BusySignal, overrides: dict[str, BusySignal]) -> Iterator[tuple[str, BusySignal]]:
    yield promql.selector(exclude=tuple(sorted(overrides))), default
    for ns in sorted(overrides):
        yield promql.selector(only=ns), overrides[ns]


def container_expr(signal: BusySignal, sel: str, global_name: str) -> str:
    """The container's busy ratio under `signal`, for the containers `sel` selects.

    A container on a shared GPU (time-slicing, MPS) has no busy ratio of its own whatever the signal:
    GPUMetricsMissing holds it (see `promql.container_shared`).
    """
    shared = f"unless on ({BY_WORKLOAD}) {promql.SHARED}"
    if signal.name in NAMED:
        series = promql.GPU_UTILIZATION if signal.name == global_name else _PER_GPU[signal.name]
        return f"avg by ({BY_WORKLOAD}) ({series}{sel}) {shared}"
    gpu_containers = f"count by ({BY_WORKLOAD}) ({promql.GPU_UTILIZATION}{sel} or {promql.GPU_FB_USED}{sel})"
    return (f"(\nmax by ({BY_WORKLOAD}) (clamp(\n{signal.expr.strip()}\n, 0, 1))\nand on ({BY_WORKLOAD})\n"
            f"{gpu_containers}\n)\n{shared}")


def recording_rules(default: BusySignal, overrides: dict[str, BusySignal],
                    scrape: promql.Scrape) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(extra per-GPU rules, container utilization rules): recorded after and instead of the defaults."""
    global_name = global_gpu_signal(default)
    used = sorted({s.name for _, s in _variants(default, overrides) if s.name in NAMED} - {global_name})
    per_gpu_rules = [{"record": _PER_GPU[n], "expr": per_gpu(n, scrape)} for n in used]
    # One rule, the namespaces' variants joined by `or`: two rules recording one series are duplicates.
    parts = [container_expr(s, sel, global_name) for sel, s in _variants(default, overrides)]
    expr = parts[0] if len(parts) == 1 else "\nor\n".join(f"(\n{p}\n)" for p in parts)
    return per_gpu_rules, [{"record": promql.UTILIZATION, "expr": expr}]
