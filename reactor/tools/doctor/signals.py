"""Doctor checks of the signals the rules read beyond utilization's existence: which busy signal is in use
(globally and per allowed namespace, from rules/thresholds.yaml) and whether it has data, and whether the CPU
half has cAdvisor's CFS series for the GPU containers.

Why: a signal chosen but not exported (`sm_active` on a dcgm-exporter without profiling metrics) leaves every
container unmeasured, so GPUMetricsMissing holds them all and nothing is ever right-sized; no cAdvisor series
makes every alert's `cpu_throttling` "unknown", and with `cpu.unknownHolds: true` no GPU is ever shrunk. Both
look like a quiet, healthy reactor. Reads only (instant queries); `Unreachable` when Prometheus does not answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactor.policy.values import Policy
from reactor.tools.doctor.http import Unreachable, prometheus_query
from reactor.tools.doctor.report import Check, failing, ok, warning
from reactor.tools.rules.cpu import THROTTLING
from reactor.tools.rules.promql import GPUS
from reactor.tools.rules.signal import GPU_UTIL, GR_ENGINE_ACTIVE, SM_ACTIVE, BusySignal
from reactor.tools.rules.values import Values

# The DCGM field each named signal reads; the default falls back to GPU_UTIL off MIG.
FIELDS = {GR_ENGINE_ACTIVE: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", SM_ACTIVE: "DCGM_FI_PROF_SM_ACTIVE",
          GPU_UTIL: "DCGM_FI_DEV_GPU_UTIL"}
FALLBACK = "DCGM_FI_DEV_GPU_UTIL"
PERIODS, THROTTLED = "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total"
EXPORT_FIX = ("add {field} to dcgm-exporter's collectors CSV (the chart's ConfigMap of metrics, `-f`; profiling "
              "fields need a datacenter GPU and DCGM's profiling module), or choose another `signal` in "
              "rules/thresholds.yaml and `reactor rules render`")
CADVISOR_FIX = ("scrape the kubelets' cAdvisor endpoint (kube-prometheus-stack: kubelet.serviceMonitor.cAdvisor: "
                "true, the default); a renamed scrape: set scrape.cadvisorLabels in rules/thresholds.yaml")


def signal_checks(base: str, values: Values | None, policy: Policy, source: str) -> Iterator[Check]:
    """`busy-signal`, then `busy-signal <namespace>` for each namespace the reactor may act in, then
    `cpu-metrics`. `values` None: the thresholds file is unknown, the default spellings are assumed."""
    namespaces = _namespaces(values, policy)
    if values is None:
        yield warning("busy-signal", "which busy signal the rules use is unknown",
                      "pass --thresholds rules/thresholds.yaml (the values the rules were rendered from)")
    else:
        data = _Data(base, values)
        yield data.global_check(source)
        for ns in namespaces:
            yield data.namespace_check(ns, values.signal_overrides.get(ns, values.signal), source)
    yield cpu_metrics(base, values or Values(), policy, namespaces)


def _namespaces(values: Values | None, policy: Policy) -> list[str]:
    """The namespaces `namespaces.allow` names, and with `*` those the thresholds give their own signal."""
    named = [ns for ns in policy.allow if ns != "*" and policy.namespace_allowed(ns)]
    if "*" in policy.allow and values is not None:
        named += [ns for ns in values.signal_overrides if policy.namespace_allowed(ns)]
    return sorted(set(named))


def _describe(signal: BusySignal) -> str:
    return f"expr `{' '.join(signal.expr.split())[:80]}`" if signal.name == "expr" else signal.name


class _Data:
    """Prometheus's answers, asked once per series and remembered: namespace → series naming a pod."""

    def __init__(self, base: str, values: Values) -> None:
        self.base, self.values = base, values
        prefix = "exported_" if values.scrape_labels == "exported" else ""
        self.ns_label, self.pod_label = f"{prefix}namespace", f"{prefix}pod"
        self._per_namespace: dict[str, dict[str, int] | str] = {}
        self._exported: dict[str, int] = {}

    def exported(self, field: str) -> int:
        if field not in self._exported:
            self._exported[field] = _count(self.base, f"count({field})")
        return self._exported[field]

    def by_namespace(self, expr: str, ns_label: str) -> dict[str, int] | str:
        """Series per namespace label value, or why the expression does not evaluate."""
        if expr not in self._per_namespace:
            try:
                result = prometheus_query(self.base, f"count by ({ns_label}) ({expr})")
                self._per_namespace[expr] = {_label(r, ns_label): int(float(r["value"][1])) for r in result}
            except Unreachable as e:
                self._per_namespace[expr] = str(e)
        return self._per_namespace[expr]

    def field_series(self, field: str) -> str:
        return f'{field}{{{self.pod_label}!=""}}'

    def global_check(self, source: str) -> Check:
        signal = self.values.signal
        overrides = ", ".join(f"{ns}: {_describe(s)}" for ns, s in sorted(self.values.signal_overrides.items()))
        chosen = f"signal {_describe(signal)} ({source}{'; per namespace: ' + overrides if overrides else ''})"
        if signal.name == "expr":
            found = self.by_namespace(signal.expr, "namespace")
            return _expr_verdict("busy-signal", chosen, found, None)
        return self._named_verdict("busy-signal", chosen, signal.name, None)

    def namespace_check(self, ns: str, signal: BusySignal, source: str) -> Check:
        name = f"busy-signal {ns}"
        own = " (its own)" if ns in self.values.signal_overrides else ""
        chosen = f"signal {_describe(signal)}{own}"
        if signal.name == "expr":
            return _expr_verdict(name, chosen, self.by_namespace(signal.expr, "namespace"), ns)
        return self._named_verdict(name, chosen, signal.name, ns)

    def _named_verdict(self, name: str, chosen: str, signal: str, ns: str | None) -> Check:
        field = FIELDS[signal]
        if not self.exported(field):
            if signal == GR_ENGINE_ACTIVE and self.exported(FALLBACK):
                return self._fallback(name, chosen, ns)
            return failing(name, f"{chosen}, but {field} is not exported by this dcgm-exporter config: every GPU "
                           "container reads as unmeasured, GPUMetricsMissing holds them all",
                           EXPORT_FIX.format(field=field))
        if ns is None:
            return ok(name, f"{chosen}: {field} has {self.exported(field)} series")
        found = self.by_namespace(self.field_series(field), self.ns_label)
        count = found.get(ns, 0) if isinstance(found, dict) else 0
        if not count:
            return warning(name, f"{chosen}: no {field} series names a pod of {ns}",
                           f"check again once a GPU pod runs in {ns}")
        return ok(name, f"{chosen}: {field} measures {count} GPUs of {ns}'s pods")

    def _fallback(self, name: str, chosen: str, ns: str | None) -> Check:
        detail = (f"{chosen}: DCGM_FI_PROF_GR_ENGINE_ACTIVE is not exported, the rules fall back to "
                  f"{FALLBACK} / 100 (LLM servers can read 100% while idle; MIG instances have none)")
        fix = EXPORT_FIX.format(field="DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        if ns is not None:
            found = self.by_namespace(self.field_series(FALLBACK), self.ns_label)
            if not (isinstance(found, dict) and found.get(ns)):
                detail += f"; no {FALLBACK} series names a pod of {ns}"
        return warning(name, detail, fix)


def _expr_verdict(name: str, chosen: str, found: dict[str, int] | str, ns: str | None) -> Check:
    fix = "run the expression in Prometheus; it must yield a 0-1 value per namespace, pod, container"
    if isinstance(found, str):
        return failing(name, f"{chosen} does not evaluate: {found}", fix)
    if not found:
        return failing(name, f"{chosen} returns no series: every container it covers reads as unmeasured "
                       "(GPUMetricsMissing holds them)", fix)
    if set(found) == {""}:
        return failing(name, f"{chosen} yields series without a namespace label: the rules cannot tie them "
                       "to a container", fix)
    if ns is None:
        return ok(name, f"{chosen}: {sum(found.values())} series in {len(found)} namespaces")
    if not found.get(ns):
        return warning(name, f"{chosen}: no series for {ns}", f"check again once the server runs in {ns}")
    return ok(name, f"{chosen}: {found[ns]} series in {ns}")


def cpu_metrics(base: str, values: Values, policy: Policy, namespaces: list[str]) -> Check:
    """cAdvisor's CFS counters exist, and every GPU container of the allowed namespaces has a throttling
    measure (the recorded ratio) — one without gets `cpu_throttling: unknown` on every alert."""
    plain = values.cadvisor_labels == "plain"
    pod, container = ("pod", "container") if plain else ("exported_pod", "exported_container")
    match = f'{{{container}!="", {container}!="POD", {pod}!=""}}'
    periods, throttled = _count(base, f"count({PERIODS}{match})"), _count(base, f"count({THROTTLED}{match})")
    holds = policy.cpu_unknown_holds
    if not periods or not throttled:
        missing = " and ".join(m for m, n in ((PERIODS, periods), (THROTTLED, throttled)) if not n)
        consequence = ("with cpu.unknownHolds: true no GPU will ever be shrunk (every alert's cpu_throttling is "
                       "unknown)" if holds else "GPU shrinks go ahead on GPU utilization alone")
        detail = f"no cAdvisor series {missing} ({values.cadvisor_labels} labels): {consequence}, and " \
                 "GPUStarvedByCPU never fires"
        fix = CADVISOR_FIX + ("; or set cpu.unknownHolds: false to shrink without knowing" if holds else "")
        return failing("cpu-metrics", detail, fix) if holds else warning("cpu-metrics", detail, fix)
    scope = f'{{namespace=~"{"|".join(namespaces)}"}}' if namespaces else ""
    if not _count(base, f"count({GPUS}{scope})"):
        return ok("cpu-metrics", f"cAdvisor CFS series for {periods} containers; no GPU container recorded "
                  f"{'in ' + ', '.join(namespaces) + ' ' if namespaces else ''}yet to compare (see gpu-rules)")
    unmeasured = prometheus_query(base, f"group by (namespace, pod, container) ({GPUS}{scope} "
                                        f"unless on (namespace, pod, container) {THROTTLING})")
    if not unmeasured:
        return ok("cpu-metrics", f"cAdvisor CFS series for {periods} containers; every GPU container "
                  f"{'of ' + ', '.join(namespaces) + ' ' if namespaces else ''}has a throttling measure")
    named = ", ".join(f"{_label(r, 'namespace')}/{_label(r, 'pod')}/{_label(r, 'container')}"
                      for r in unmeasured[:3])
    more = f" (+{len(unmeasured) - 3} more)" if len(unmeasured) > 3 else ""
    consequence = "cpu.unknownHolds: true never shrinks their GPUs" if holds else "their shrinks ignore their CPU"
    return warning("cpu-metrics", f"{len(unmeasured)} GPU containers have no CPU throttling measure: {named}{more} "
                   f"(no cAdvisor series for them, or no CPU limit: CFS counts periods only under a limit); "
                   f"{consequence}", "give the containers a CPU limit, or check the kubelet scrape on their node")


def _count(base: str, expr: str) -> int:
    result = prometheus_query(base, expr)
    return int(float(result[0]["value"][1])) if result else 0


def _label(series: dict[str, Any], name: str) -> str:
    return str((series.get("metric") or {}).get(name, ""))


__all__ = ["signal_checks", "cpu_metrics"]
