"""The rule values SREs tune (`rules/thresholds.yaml`): schema, defaults and validation.

Pure: parses an already-loaded YAML document into frozen values, or raises a
`ConfigError` that names the offending key. Reading files is the caller's job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from reactor.config.fields import parse_duration
from reactor.core.errors import ConfigError
from reactor.tools.rules.signal import NAMED as NAMED_SIGNALS
from reactor.tools.rules.signal import BusySignal

AUTO = "auto"  # runbookUrl: docs/runbooks.md where this checkout is hosted (the renderer resolves it)

SEVERITIES = ("info", "warning", "critical")
# How the scrape spells the workload's labels on dcgm-exporter series (see `Values.scrape_labels`).
LABEL_SPELLINGS = ("exported", "plain")
# The exporter's own container: `nvidia-dcgm-exporter` (GPU Operator), `exporter` (NVIDIA's
# dcgm-exporter Helm chart), `dcgm-exporter` (other manifests).
DEFAULT_EXPORTER_CONTAINER = "nvidia-dcgm-exporter|dcgm-exporter|exporter"
# The exporter's own scrape job: the `job` label Prometheus gives its targets (a ServiceMonitor's is the
# Service's name: `nvidia-dcgm-exporter` under GPU Operator, `dcgm-exporter` from NVIDIA's chart). Only series
# from these targets are counted: a tenant's pod exposing DCGM-named series of its own is another target.
DEFAULT_EXPORTER_JOB = "nvidia-dcgm-exporter|dcgm-exporter"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Tunables:
    """The knobs of one section. `threshold` is a 0-1 ratio; unused knobs keep their defaults."""

    threshold: float = 0.0
    window: timedelta = timedelta(minutes=30)
    for_: timedelta = timedelta(minutes=30)
    keep_firing_for: timedelta = timedelta(0)
    severity: str = "warning"


# The knobs of a section that is one alert's: its threshold, rate window, `for`, `keep_firing_for` and severity.
_ALERT = frozenset({"threshold", "window", "for", "keepFiringFor", "severity"})
_MINUTE = timedelta(minutes=1)
# Section name -> (the keys it accepts, its default tunables).
SECTIONS: Mapping[str, tuple[frozenset[str], Tunables]] = MappingProxyType({
    "underutilized": (_ALERT, Tunables(0.30, 30 * _MINUTE, 30 * _MINUTE, 15 * _MINUTE)),
    "idle": (_ALERT, Tunables(0.02, 60 * _MINUTE, 60 * _MINUTE, 15 * _MINUTE)),
    "saturated": (_ALERT, Tunables(0.95, 15 * _MINUTE, 15 * _MINUTE, 10 * _MINUTE)),
    "memorySaturated": (_ALERT, Tunables(0.95, 15 * _MINUTE, 10 * _MINUTE, 10 * _MINUTE)),
    # warning, not info: kube-prometheus-stack's InfoInhibitor mutes severity=info alerts.
    "metricsMissing": (_ALERT - {"threshold"}, Tunables(0.0, 60 * _MINUTE, 10 * _MINUTE, timedelta(0), "warning")),
    "idleGpu": (frozenset({"threshold", "window"}), Tunables(0.05, 30 * _MINUTE)),
    # The CPU half (see rules/cpu.py): the rate window of the throttling and CPU-use series, and
    # GPUStarvedByCPU (GPU below underutilized.threshold while throttled above this threshold).
    "cpuThrottling": (frozenset({"window"}), Tunables(0.0, 5 * _MINUTE)),
    "starvedByCpu": (_ALERT, Tunables(0.25, 15 * _MINUTE, 15 * _MINUTE, 10 * _MINUTE)),
    # GPUContainerNearMemoryLimit: memory working set / memory limit above this ratio (cAdvisor).
    "nearMemoryLimit": (_ALERT, Tunables(0.90, 10 * _MINUTE, 5 * _MINUTE, 10 * _MINUTE)),
})
_TOP = frozenset(
    {
        "evaluationInterval", "staleAfter", "runbookUrl", "scrape", "exporter", "kubeStateMetrics",
        "prometheusRule", "defaults", "namespaces", "signal",
    }
)
_PROMETHEUS_RULE = frozenset({"name", "namespace", "labels"})
_SCRAPE = frozenset({"labels", "cadvisorLabels"})
_EXPORTER = frozenset({"container", "job", "namespace"})
_KUBE_STATE_METRICS = frozenset({"enabled"})


@dataclass(frozen=True, slots=True)
class Values:
    """Everything the renderer needs. `overrides[ns][section]` is the namespace's effective section.

    `scrape_labels`: which spelling of the workload's labels the scrape produces. "exported"
    (honor_labels false with the exporter's own namespace/pod/container target labels, the
    dcgm-exporter chart's default): only `exported_*` name a workload and every series without
    `exported_pod` is a GPU no pod holds. "plain" (honor_labels true, or targets without those
    labels): `namespace`/`pod`/`container` name the workload, except on the series of a free GPU
    that carry the exporter's own target labels: a container matching `exporter_container` is
    never a workload. `kube_state_metrics`: GPUMetricsMissing also reads `kube_pod_info`.

    `exporter_job`, `exporter_namespace`: regular expressions of the `job` and (exported spelling only) the
    `namespace` target labels of the exporter's own scrape targets; "" leaves that label unchecked. Every raw
    DCGM selector carries them, so series another target exposes (a tenant's pod naming itself or another
    team's pod in DCGM-named series) are never counted.
    """

    evaluation_interval: timedelta = timedelta(minutes=1)
    stale_after: timedelta = timedelta(minutes=10)
    runbook_url: str = AUTO  # or an http(s) URL of docs/runbooks.md; the renderer resolves `auto` (checkout.py)
    scrape_labels: str = "exported"
    exporter_container: str = DEFAULT_EXPORTER_CONTAINER
    exporter_job: str = DEFAULT_EXPORTER_JOB
    exporter_namespace: str = ""
    kube_state_metrics: bool = False
    cadvisor_labels: str = "plain"  # cAdvisor's spelling: the kubelet labels its series plainly
    signal: BusySignal = BusySignal()  # the busy signal (rules/signal.py); per namespace in signal_overrides
    signal_overrides: Mapping[str, BusySignal] = field(default_factory=lambda: MappingProxyType({}))
    rule_name: str = "gpu-reactor"
    rule_namespace: str = "monitoring"
    rule_labels: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"release": "kube-prometheus-stack"}))
    defaults: Mapping[str, Tunables] = field(
        default_factory=lambda: MappingProxyType({k: v[1] for k, v in SECTIONS.items()}))
    overrides: Mapping[str, Mapping[str, Tunables]] = field(default_factory=lambda: MappingProxyType({}))

    def namespaces_overriding(self, section: str) -> tuple[str, ...]:
        return tuple(sorted(ns for ns, sections in self.overrides.items() if section in sections))


def _mapping(key: str, raw: Any, allowed: frozenset[str] | None = None) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(key, f"expected a mapping, got {raw!r}")
    for sub in raw:
        if allowed is not None and sub not in allowed:
            raise ConfigError(f"{key}.{sub}" if key else str(sub), f"unknown key; known: {', '.join(sorted(allowed))}")
    return raw


def _ratio(key: str, raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0.0 <= raw <= 1.0:
        raise ConfigError(key, f"expected a ratio between 0 and 1, got {raw!r}")
    return float(raw)


def _duration(key: str, raw: Any) -> timedelta:
    value = parse_duration(key, raw)
    if value < timedelta(0) or value % timedelta(seconds=1):
        raise ConfigError(key, f"expected a duration in whole seconds like '30s', '10m' or '2h', got {raw!r}")
    return value


def _severity(key: str, raw: Any) -> str:
    if raw not in SEVERITIES:
        raise ConfigError(key, f"must be one of {', '.join(SEVERITIES)}, got {raw!r}")
    return str(raw)


_FIELDS: Mapping[str, tuple[str, Callable[[str, Any], Any]]] = {
    "threshold": ("threshold", _ratio),
    "window": ("window", _duration),
    "for": ("for_", _duration),
    "keepFiringFor": ("keep_firing_for", _duration),
    "severity": ("severity", _severity),
}


def _section(key: str, name: str, raw: Any, base: Tunables) -> Tunables:
    doc = _mapping(key, raw, SECTIONS[name][0])
    changes = {_FIELDS[k][0]: _FIELDS[k][1](f"{key}.{k}", v) for k, v in doc.items()}
    tunables = replace(base, **changes)
    if "window" in doc and tunables.window <= timedelta(0):
        raise ConfigError(f"{key}.window", "must be longer than 0s")
    return tunables


def _sections(key: str, raw: Any, base: Mapping[str, Tunables]) -> dict[str, Tunables]:
    doc = _mapping(key, raw, frozenset(SECTIONS))
    return {name: _section(f"{key}.{name}", name, sub, base[name]) for name, sub in doc.items()}


def _namespaces(raw: Any, defaults: Mapping[str, Tunables]) -> dict[str, Mapping[str, Tunables]]:
    doc = _mapping("namespaces", raw)
    out: dict[str, Mapping[str, Tunables]] = {}
    for ns, sections in doc.items():
        if not isinstance(ns, str) or not _DNS_LABEL.match(ns) or len(ns) > 63:
            raise ConfigError(f"namespaces.{ns}", "not a valid Kubernetes namespace name")
        if isinstance(sections, dict):
            sections = {k: v for k, v in sections.items() if k != "signal"}
        out[ns] = MappingProxyType(_sections(f"namespaces.{ns}", sections, defaults))
    return out


def _signal(key: str, raw: Any) -> BusySignal:
    """`gr_engine_active`, `sm_active`, `gpu_util`, or `{expr: PROMQL}` (a 0-1 busy value per container)."""
    if isinstance(raw, str) and raw in NAMED_SIGNALS:
        return BusySignal(raw)
    if isinstance(raw, dict) and set(raw) == {"expr"} and isinstance(raw["expr"], str) and raw["expr"].strip():
        return BusySignal("expr", raw["expr"])
    raise ConfigError(key, f"expected one of {', '.join(NAMED_SIGNALS)} or {{expr: PROMQL}}, got {raw!r}")


def _signals(top: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if "signal" in top:
        found["signal"] = _signal("signal", top["signal"])
    per_ns = {ns: _signal(f"namespaces.{ns}.signal", sections["signal"])
              for ns, sections in (top.get("namespaces") or {}).items()
              if isinstance(sections, dict) and "signal" in sections}
    if per_ns:
        found["signal_overrides"] = MappingProxyType(per_ns)
    return found


def _check_order(prefix: str, sections: Mapping[str, Tunables]) -> None:
    """Idle below underutilized below saturated: otherwise the alerts contradict each other."""
    idle, under, sat = sections["idle"], sections["underutilized"], sections["saturated"]
    if idle.threshold > under.threshold:
        raise ConfigError(f"{prefix}idle.threshold", f"must not exceed underutilized.threshold ({under.threshold})")
    if under.threshold >= sat.threshold:
        raise ConfigError(f"{prefix}underutilized.threshold", f"must be below saturated.threshold ({sat.threshold})")


def _rule_meta(raw: Any) -> dict[str, Any]:
    doc = _mapping("prometheusRule", raw, _PROMETHEUS_RULE)
    meta: dict[str, Any] = {}
    for key in ("name", "namespace"):
        if key in doc:
            if not isinstance(doc[key], str) or not _DNS_LABEL.match(doc[key]):
                raise ConfigError(f"prometheusRule.{key}", f"not a valid Kubernetes name: {doc[key]!r}")
            meta[f"rule_{key}"] = doc[key]
    if "labels" in doc:
        labels = _mapping("prometheusRule.labels", doc["labels"])
        for k, v in labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ConfigError(f"prometheusRule.labels.{k}", "label names and values must be strings")
        meta["rule_labels"] = MappingProxyType(dict(labels))
    return meta


def _scrape(raw: Any) -> dict[str, Any]:
    doc = _mapping("scrape", raw, _SCRAPE)
    found = {}
    for key, name in (("labels", "scrape_labels"), ("cadvisorLabels", "cadvisor_labels")):
        if key not in doc:
            continue
        if doc[key] not in LABEL_SPELLINGS:
            raise ConfigError(f"scrape.{key}", f"must be one of {', '.join(LABEL_SPELLINGS)}, got {doc[key]!r}")
        found[name] = doc[key]
    return found


def _pattern(key: str, pattern: Any, *, empty_ok: bool, what: str = "target") -> str:
    """A label-value regex rendered into a `=~"..."` / `!~"..."` matcher: no quote, backslash or newline."""
    if not isinstance(pattern, str) or (not pattern and not empty_ok) or any(c in pattern for c in '"\\\n'):
        raise ConfigError(key, f"expected a regular expression without quotes or backslashes, got {pattern!r}")
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise ConfigError(key, f"not a valid regular expression: {e}") from e
    if pattern and compiled.fullmatch(""):
        raise ConfigError(key, f"{pattern!r} matches the empty value: it would match every {what}")
    return pattern


def _exporter(raw: Any) -> dict[str, Any]:
    doc = _mapping("exporter", raw, _EXPORTER)
    found: dict[str, Any] = {}
    if "container" in doc:
        found["exporter_container"] = _pattern("exporter.container", doc["container"], empty_ok=False,
                                                 what="container")
    for key in ("job", "namespace"):
        if key in doc:
            found[f"exporter_{key}"] = _pattern(f"exporter.{key}", doc[key], empty_ok=True)
    return found


def _check_exporter_targets(values: Values) -> None:
    """The exporter's targets must be told apart by a label no other target can claim."""
    if not values.exporter_job and not values.exporter_namespace:
        raise ConfigError("exporter.job", "exporter.job and exporter.namespace are both empty: DCGM_FI_* series "
                          "from any scrape target (a tenant's pod among them) would count")
    if values.exporter_namespace and values.scrape_labels != "exported":
        raise ConfigError("exporter.namespace", "needs scrape.labels: exported; with honorLabels: true the "
                          "namespace label names the workload, not the exporter's target (use exporter.job)")


def _kube_state_metrics(raw: Any) -> dict[str, Any]:
    doc = _mapping("kubeStateMetrics", raw, _KUBE_STATE_METRICS)
    if "enabled" not in doc:
        return {}
    if not isinstance(doc["enabled"], bool):
        raise ConfigError("kubeStateMetrics.enabled", f"expected true or false, got {doc['enabled']!r}")
    return {"kube_state_metrics": doc["enabled"]}


def build_values(doc: Any) -> Values:
    """Validate a parsed values document into `Values`; every error names its key."""
    if doc is None:
        doc = {}
    top = _mapping("", doc, _TOP) if isinstance(doc, dict) else None
    if top is None:
        raise ConfigError("(top)", "the values file must be a YAML mapping")
    fields: dict[str, Any] = {}
    for key, name in (("evaluationInterval", "evaluation_interval"), ("staleAfter", "stale_after")):
        if key in top:
            fields[name] = _duration(key, top[key])
            if fields[name] <= timedelta(0):
                raise ConfigError(key, "must be longer than 0s")
    if "runbookUrl" in top:
        url = top["runbookUrl"]
        if not isinstance(url, str) or not (url == AUTO or url.startswith(("http://", "https://"))) or "#" in url:
            raise ConfigError("runbookUrl", f"expected `auto` or an http(s) URL without #fragment, got {url!r}")
        fields["runbook_url"] = top["runbookUrl"]
    fields.update(_scrape(top.get("scrape")))
    fields.update(_exporter(top.get("exporter")))
    fields.update(_kube_state_metrics(top.get("kubeStateMetrics")))
    fields.update(_rule_meta(top.get("prometheusRule")))
    fields.update(_signals(top))
    defaults = {**Values().defaults, **_sections("defaults", top.get("defaults"), Values().defaults)}
    _check_order("defaults.", defaults)
    overrides = _namespaces(top.get("namespaces"), defaults)
    for ns, sections in overrides.items():
        _check_order(f"namespaces.{ns}.", {**defaults, **sections})
    values = Values(
        **fields, defaults=MappingProxyType(defaults), overrides=MappingProxyType(overrides)
    )
    _check_windows(values)
    _check_exporter_targets(values)
    return values


def _check_windows(values: Values) -> None:
    """A window shorter than two evaluations averages one sample: no smoothing at all."""
    pairs = [(f"defaults.{n}", t) for n, t in values.defaults.items()]
    pairs += [(f"namespaces.{ns}.{n}", t) for ns, s in values.overrides.items() for n, t in s.items()]
    for key, tunables in pairs:
        if tunables.window < 2 * values.evaluation_interval:
            raise ConfigError(f"{key}.window",
                              f"must be at least twice evaluationInterval ({values.evaluation_interval})")
