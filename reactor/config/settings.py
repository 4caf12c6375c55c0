"""The one settings object: a YAML policy file plus `REACTOR_*` environment overrides, validated once.

Every key has a default and a bound; every bad value is reported at once (`ConfigErrors`), each named by its
source — the file and key, or the `REACTOR_*` variable (`config_sources`).
Nothing here reads the environment at import time: `load_settings` is called at start.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from reactor.config.fields import (
    boolean,
    bounded,
    choice,
    described,
    duration_in,
    duration_schema,
    format_duration,
    json_schema_of,
    listen,
    memory_bytes,
    millicores,
    names,
    names_or_star,
    opt_str,
    read_yaml_file,
    resource,
    without_credentials,
)
from reactor.config.sources import Problems, env_values, file_values
from reactor.core.errors import ConfigError
from reactor.core.model import KNOWN_ALERTS, Mode
from reactor.integrations.adapters import Adapter, Adapters
from reactor.integrations.adapters.config import (
    ADAPTER_KEYS,
    BUILTIN_NAMES,
    KUEUE_RELEASE,
    enabled,
    parse_builtin,
    parse_custom,
    parse_incremental_gate,
    parse_kueue_version,
    parse_zero_downtime,
)
from reactor.policy.values import CPU_APPLY_TO, DEFAULT_ALERTS, REVERTIBLE, STRATEGIES, Policy, Window


@dataclass(frozen=True, slots=True)
class Server:
    listen: str = "0.0.0.0:8080"
    token_file: str | None = None
    # A notification carries its whole group (Alertmanager's max_alerts: 0): ~700 bytes an alert, so
    # 8 MiB takes ~12,000 alerts. A group over the limit gets 413 on every delivery and is lost.
    max_body_bytes: int = 8 << 20
    threads: int = 8
    timeout: timedelta = timedelta(seconds=25)
    tls_cert: str | None = None
    tls_key: str | None = None
    state_key_file: str | None = None  # HMAC key of the reactor's state annotations (statemac.py)
    # Work per notification: below Alertmanager's notify timeout, max(group_interval, 10 s).
    notification_deadline: timedelta = timedelta(seconds=8)
    max_unknown_pods: int = 10  # owners of pods that do not exist looked up per notification (2 reads each)
    state_previous_key_file: str | None = None
    # The Lease (coordination.k8s.io) that elects the one replica that verifies rollouts.
    lease_namespace: str | None = "gpu-reactor"
    lease_name: str | None = "gpu-reactor-verifier"  # None: no election (one replica only)
    # The Lease (in lease_namespace) that keeps the reactor's latest write per workload (state/ledger_codec.py; the
    # shipped manifests name gpu-reactor-state); None: kept in this process (one replica only; after a restart
    # the first record seen of each workload is believed).
    state_ledger_name: str | None = None
    # /healthz, /readyz and /metrics, on a listener and a thread of their own (never the webhook's).
    probe_listen: str = "0.0.0.0:8081"
    # The longest a client may take to send a whole request, head and body (each read: 5 s at most).
    read_timeout: timedelta = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Kube:
    kubeconfig: str | None = None
    context: str | None = None
    qps: float = 20.0
    burst: int = 40
    timeout: timedelta = timedelta(seconds=10)
    conflict_retries: int = 3
    watch_cache: bool = True  # read the cached kinds from list+watch informers (reactor/cluster/informer.py)


@dataclass(frozen=True, slots=True)
class AlertSource:
    """Where rebalancing asks which donors are idle now: Alertmanager's API v2 (`GET /api/v2/alerts`).

    The reactor keeps no store of alerts: Alertmanager's view is the one the rules and silences already shape."""

    url: str | None = None  # e.g. http://alertmanager-operated.monitoring:9093
    token_file: str | None = None  # a bearer token, sent as `Authorization: Bearer`, when Alertmanager sits behind one
    ca_file: str | None = None  # the CA bundle an https URL is verified against (default: the system's)
    timeout: timedelta = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class ConfirmSource:
    """The Prometheus every alert is confirmed against before any write (reactor/sources/confirm.py): the one the
    rules run in (Prometheus's API v1, `GET /api/v1/rules`). `enabled: false` acts on alerts unconfirmed: the
    reactor then trusts whoever can reach Alertmanager's API (check-config and doctor warn)."""

    enabled: bool = True
    url: str | None = None  # e.g. http://kube-prometheus-stack-prometheus.monitoring:9090
    token_file: str | None = None  # a bearer token, sent as `Authorization: Bearer`, when Prometheus sits behind one
    ca_file: str | None = None  # the CA bundle an https URL is verified against (default: the system's)
    timeout: timedelta = timedelta(seconds=3)  # inside server.notificationDeadline, inside Alertmanager's timeout
    reuse: bool = True  # an answer serves until Prometheus's rule groups evaluate again (sources/confirm.py)


@dataclass(frozen=True, slots=True)
class Settings:
    policy: Policy = field(default_factory=Policy)
    server: Server = field(default_factory=Server)
    kube: Kube = field(default_factory=Kube)
    alertmanager: AlertSource = field(default_factory=AlertSource)
    confirm: ConfirmSource = field(default_factory=ConfirmSource)
    log_format: str = "json"
    log_level: str = "INFO"
    adapters_builtin: tuple[str, ...] = BUILTIN_NAMES  # operators' resources the reactor changes (adapters/)
    adapters_custom: tuple[Adapter, ...] = ()
    adapters_ray_incremental_gate: bool | None = None  # KubeRay's RayServiceIncrementalUpgrade gate, as declared
    adapters_ray_zero_downtime: bool | None = None  # KubeRay's ENABLE_ZERO_DOWNTIME, as declared
    adapters_kueue_version: tuple[int, int, int] | None = None  # the Kueue release installed, as declared

    @property
    def adapters(self) -> Adapters:
        """The enabled adapters as a value, handed to the engine, the resolver, the act step and the verifier."""
        return Adapters(enabled(self.adapters_builtin, self.adapters_custom,
                                ray_incremental_gate=self.adapters_ray_incremental_gate,
                                ray_zero_downtime=self.adapters_ray_zero_downtime),
                        kueue_version=self.adapters_kueue_version)


@described({"enum": [m.value for m in Mode]})
def _mode(key: str, raw: Any) -> Mode:
    return Mode(choice(*(m.value for m in Mode))(key, raw))


@described({"type": "object", "additionalProperties": False,
            "properties": {name: {"type": "array", "minItems": 1, "items": {"enum": sorted(STRATEGIES)}}
                           for name in sorted(KNOWN_ALERTS)}})
def _alerts(key: str, raw: Any) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        raise ConfigError(key, "expected a mapping of alert name to a list of strategies")
    merged = dict(DEFAULT_ALERTS)
    for name, strategies in raw.items():
        if name not in KNOWN_ALERTS:
            raise ConfigError(f"{key}.{name}", f"unknown alert; known: {', '.join(sorted(KNOWN_ALERTS))}")
        if not isinstance(strategies, list) or not strategies:
            raise ConfigError(f"{key}.{name}", "expected a non-empty list of strategies")
        for i, s in enumerate(strategies):
            if s not in STRATEGIES:
                known = ", ".join(sorted(STRATEGIES))
                raise ConfigError(f"{key}.{name}[{i}]", f"unknown strategy {s!r}; known: {known}")
        merged[name] = tuple(strategies)
    return MappingProxyType(merged)


def _listed(options: frozenset[str], expected: str, refused: str, known: str) -> Callable[[str, Any], tuple[str, ...]]:
    """A list whose every item is one of `options`; the problem names the item and what is known."""

    @described({"type": "array", "items": {"enum": sorted(options)}})
    def parse(key: str, raw: Any) -> tuple[str, ...]:
        if not isinstance(raw, list):
            raise ConfigError(key, f"expected a list of {expected}")
        for i, item in enumerate(raw):
            if item not in options:
                raise ConfigError(f"{key}[{i}]", f"{refused} {item!r}; {known}: {', '.join(sorted(options))}")
        return tuple(raw)

    return parse


_revert = _listed(REVERTIBLE, "strategies whose effect is undone when the alert resolves", "not revertible:",
                  "revertible")
_alert_names = _listed(KNOWN_ALERTS, "alert names", "unknown alert", "known")


@described({"type": ["object", "null"], "propertyNames": json_schema_of(resource),
            "additionalProperties": json_schema_of(bounded(float, 0, 100_000))})
def _costs(key: str, raw: Any) -> Mapping[str, float]:
    """{extended resource: cost of one GPU-hour}; a price is a number from 0 to 100,000 (any currency)."""
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, dict):
        raise ConfigError(key, "expected a mapping of GPU resource to the cost of one GPU-hour, "
                               "e.g. {nvidia.com/gpu: 2.5}")
    return MappingProxyType({resource(f"{key}.{name}", name): bounded(float, 0, 100_000)(f"{key}.{name}", cost)
                             for name, cost in raw.items()})


@described({"type": "object", "additionalProperties": False,
            "properties": {"actions": json_schema_of(bounded(int, 0, 10_000)),
                           "per": duration_schema(timedelta(seconds=1), timedelta(days=1))}})
def _window(key: str, raw: Any) -> Window:
    if not isinstance(raw, dict) or set(raw) - {"actions", "per"}:
        raise ConfigError(key, "expected {actions: N, per: DURATION}")
    actions = bounded(int, 0, 10_000)(f"{key}.actions", raw.get("actions", 0))
    per = duration_in(timedelta(seconds=1), timedelta(days=1))(f"{key}.per", raw.get("per", "10m"))
    return Window(actions, per)


described({"type": "array", "items": {"enum": list(BUILTIN_NAMES)}})(parse_builtin)
described({"type": "array", "items": {"type": "object", "propertyNames": {"enum": sorted(ADAPTER_KEYS)}}})(parse_custom)
described({"type": ["boolean", "null"]})(parse_incremental_gate)
described({"type": ["boolean", "null"]})(parse_zero_downtime)
described({"type": ["string", "null"], "pattern": KUEUE_RELEASE.pattern})(parse_kueue_version)

_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


@described({"type": ["object", "null"], "propertyNames": {"pattern": _LABEL_KEY},
            "additionalProperties": {"type": "string", "pattern": _LABEL_VALUE}})
def _labels(key: str, raw: Any) -> Mapping[str, str]:
    """A label selector's matchLabels: every key and value as Kubernetes validates labels."""
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, dict):
        raise ConfigError(key, f"expected a mapping of label to value, got {raw!r}")
    for name, value in raw.items():
        if not isinstance(name, str) or not re.match(_LABEL_KEY, name) or len(name) > 316:
            raise ConfigError(f"{key}.{name}", "not a valid label key")
        if not isinstance(value, str) or not re.match(_LABEL_VALUE, value):
            raise ConfigError(f"{key}.{name}", f"not a valid label value: {value!r}")
    return MappingProxyType(dict(raw))


_URL = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"


@described({"type": ["string", "null"], "pattern": _URL})
def _url(key: str, raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not re.match(_URL, raw):
        shown = without_credentials(raw) if isinstance(raw, str) else raw
        raise ConfigError(key, f"expected an http:// or https:// URL without query, got {shown!r}")
    return raw.rstrip("/")


# The schema: YAML path -> (section, field, parser). The environment override of a path is
# REACTOR_ + its parts in upper snake case joined by "__", e.g. REACTOR_BUDGET__GLOBAL.
_SCHEMA: dict[str, tuple[str, str, Callable[[str, Any], Any]]] = {
    "dryRun": ("policy", "dry_run", boolean),
    "gpuResource": ("policy", "gpu_resource", resource),
    "namespaces.allow": ("policy", "allow", names_or_star),
    "namespaces.deny": ("policy", "deny", names),
    "defaultMode": ("policy", "default_mode", _mode),
    "targetUtilization": ("policy", "target_utilization", bounded(float, 0.05, 1.0)),
    "cooldown": ("policy", "cooldown", duration_in(timedelta(0), timedelta(days=7))),
    "reverseAfter": ("policy", "reverse_after", duration_in(timedelta(0), timedelta(days=30))),
    "revertAfter": ("policy", "revert_after", duration_in(timedelta(0), timedelta(days=7))),
    "revert": ("policy", "revert", _revert),
    "gpus.min": ("policy", "min_gpus", bounded(int, 1, 1024)),
    "gpus.max": ("policy", "max_gpus", bounded(int, 1, 1024)),
    "replicas.min": ("policy", "min_replicas", bounded(int, 0, 10_000)),
    "replicas.max": ("policy", "max_replicas", bounded(int, 1, 10_000)),
    "budget.global": ("policy", "budget_global", _window),
    "budget.namespace": ("policy", "budget_namespace", _window),
    "priorityLadder": ("policy", "priority_ladder", names),
    "alerts": ("policy", "alerts", _alerts),
    "cluster": ("policy", "cluster", opt_str),
    "cpu.throttledAbove": ("policy", "cpu_throttled_above", bounded(float, 0.01, 1.0)),
    "cpu.unknownHolds": ("policy", "cpu_unknown_holds", boolean),
    "cpu.step": ("policy", "cpu_step_m", millicores(10, 64_000)),
    "cpu.max": ("policy", "cpu_max_m", millicores(10, 1_024_000)),
    "cpu.applyTo": ("policy", "cpu_apply_to", choice(*CPU_APPLY_TO)),
    "memory.step": ("policy", "memory_step", bounded(float, 0.01, 4.0)),
    "memory.max": ("policy", "memory_max_bytes", memory_bytes(1 << 20, 1 << 50)),
    "server.listen": ("server", "listen", listen),
    "server.tokenFile": ("server", "token_file", opt_str),
    "server.maxBodyBytes": ("server", "max_body_bytes", bounded(int, 1024, 64 << 20)),
    "server.threads": ("server", "threads", bounded(int, 1, 256)),
    "server.timeout": ("server", "timeout", duration_in(timedelta(seconds=1), timedelta(minutes=10))),
    "server.tlsCert": ("server", "tls_cert", opt_str),
    "server.tlsKey": ("server", "tls_key", opt_str),
    "server.notificationDeadline": ("server", "notification_deadline",
                                    duration_in(timedelta(seconds=1), timedelta(minutes=5))),
    "server.maxUnknownPods": ("server", "max_unknown_pods", bounded(int, 0, 10_000)),
    "state.keyFile": ("server", "state_key_file", opt_str),
    "state.previousKeyFile": ("server", "state_previous_key_file", opt_str),
    "state.ledgerName": ("server", "state_ledger_name", opt_str),
    "server.probeListen": ("server", "probe_listen", listen),
    "server.readTimeout": ("server", "read_timeout", duration_in(timedelta(seconds=1), timedelta(minutes=5))),
    "kube.kubeconfig": ("kube", "kubeconfig", opt_str),
    "kube.context": ("kube", "context", opt_str),
    "kube.qps": ("kube", "qps", bounded(float, 0.1, 10_000)),
    "kube.burst": ("kube", "burst", bounded(int, 1, 100_000)),
    "kube.timeout": ("kube", "timeout", duration_in(timedelta(seconds=1), timedelta(minutes=5))),
    "kube.conflictRetries": ("kube", "conflict_retries", bounded(int, 0, 20)),
    "verify.timeout": ("policy", "verify_timeout", duration_in(timedelta(seconds=30), timedelta(days=1))),
    "verify.interval": ("policy", "verify_interval", duration_in(timedelta(seconds=1), timedelta(minutes=10))),
    "verify.revertWindow": ("policy", "verify_revert_window", duration_in(timedelta(0), timedelta(days=30))),
    "verify.leaseNamespace": ("server", "lease_namespace", opt_str),
    "verify.leaseName": ("server", "lease_name", opt_str),
    "finops.gpuHourlyCost": ("policy", "gpu_hourly_cost", _costs),
    "adapters.builtin": ("top", "adapters_builtin", parse_builtin),
    "adapters.custom": ("top", "adapters_custom", parse_custom),
    "adapters.rayServiceIncrementalUpgrade": ("top", "adapters_ray_incremental_gate", parse_incremental_gate),
    "adapters.rayServiceZeroDowntime": ("top", "adapters_ray_zero_downtime", parse_zero_downtime),
    "adapters.kueueVersion": ("top", "adapters_kueue_version", parse_kueue_version),
    "kube.watchCache": ("kube", "watch_cache", boolean),
    "logging.format": ("top", "log_format", choice("json", "text")),
    "logging.level": ("top", "log_level", choice("DEBUG", "INFO", "WARNING", "ERROR")),
    "rebalance.enabled": ("policy", "rebalance_enabled", boolean),
    "rebalance.receiverAlerts": ("policy", "rebalance_receiver_alerts", _alert_names),
    "rebalance.donorAlerts": ("policy", "rebalance_donor_alerts", _alert_names),
    "rebalance.donorLabels": ("policy", "rebalance_donor_labels", _labels),
    "rebalance.higherPriorityDonors": ("policy", "rebalance_higher_priority_donors", boolean),
    "rebalance.alertmanagerUrl": ("alertmanager", "url", _url),
    "rebalance.alertmanagerTokenFile": ("alertmanager", "token_file", opt_str),
    "rebalance.alertmanagerCaFile": ("alertmanager", "ca_file", opt_str),
    "rebalance.alertmanagerTimeout": ("alertmanager", "timeout", duration_in(timedelta(milliseconds=100),
                                                                            timedelta(minutes=1))),
    "confirm.enabled": ("confirm", "enabled", boolean),
    "confirm.prometheusUrl": ("confirm", "url", _url),
    "confirm.tokenFile": ("confirm", "token_file", opt_str),
    "confirm.caFile": ("confirm", "ca_file", opt_str),
    "confirm.timeout": ("confirm", "timeout", duration_in(timedelta(milliseconds=100), timedelta(minutes=1))),
    "confirm.reuse": ("confirm", "reuse", boolean),
}
_SECTIONS = {"namespaces", "gpus", "replicas", "budget", "server", "kube", "logging", "state", "cpu", "memory",
             "adapters", "verify", "finops", "rebalance", "confirm"}


def env_name(path: str) -> str:
    parts = [re.sub(r"(?<!^)(?=[A-Z])", "_", p).upper() for p in path.split(".")]
    return "REACTOR_" + "__".join(parts)


def build_settings(doc: Mapping[str, Any], environ: Mapping[str, str] | None = None, *,
                   file: str | None = None) -> Settings:
    """Validate a parsed policy document (+ environment overrides) into `Settings`.

    Every problem is collected and raised together (`ConfigErrors`), each named by its source: `file: key`
    (or the bare key without `file`) or the `REACTOR_*` variable."""
    if not isinstance(doc, dict):
        raise ConfigError(file or "(top)", "the policy file must be a YAML mapping")
    problems = Problems()
    raw = file_values(doc, schema=_SCHEMA, sections=_SECTIONS, file=file, problems=problems)
    raw.update(env_values(environ or {}, {env_name(k): k for k in _SCHEMA}, problems))
    values: dict[str, dict[str, Any]] = {"policy": {}, "server": {}, "kube": {}, "alertmanager": {}, "confirm": {},
                                          "top": {}}
    invalid: set[str] = set()
    for path, (value, origin) in raw.items():
        section, name, parse = _SCHEMA[path]
        before = len(problems.found)
        with problems.checking(origin):
            values[section][name] = parse(path, value)
        if len(problems.found) > before:
            invalid.add(path)
    # The cross-field checks run in the same pass, over the values that are valid (defaults standing in for the
    # invalid ones), so one run names every problem; a check that involves an invalid key is left out (its key is
    # already named, and comparing with a default would only confuse).
    settings = Settings(policy=Policy(**values["policy"]), server=Server(**values["server"]),
                        kube=Kube(**values["kube"]), alertmanager=AlertSource(**values["alertmanager"]),
                        confirm=ConfirmSource(**values["confirm"]), **values["top"])
    for keys, problem in _inconsistencies(settings):
        if not invalid.intersection(keys):
            problems.add(raw[keys[0]][1].name(keys[0]) if keys[0] in raw else keys[0], problem)
    problems.raise_any()
    return settings


def _inconsistencies(settings: Settings) -> list[tuple[tuple[str, ...], str]]:
    """(keys involved, the first named, problem) for values that are valid alone but not together."""
    p, s = settings.policy, settings.server
    found: list[tuple[tuple[str, ...], str]] = []
    if p.min_gpus > p.max_gpus:
        found.append((("gpus.min", "gpus.max"), f"must not exceed gpus.max ({p.max_gpus})"))
    if p.min_replicas > p.max_replicas:
        found.append((("replicas.min", "replicas.max"), f"must not exceed replicas.max ({p.max_replicas})"))
    if len(set(p.priority_ladder)) != len(p.priority_ladder):
        found.append((("priorityLadder",), "lists a class twice"))
    if p.reverse_after < p.cooldown:
        found.append((("reverseAfter", "cooldown"), f"must be at least the cooldown ({format_duration(p.cooldown)})"))
    if s.notification_deadline >= s.timeout:
        found.append((("server.notificationDeadline", "server.timeout"),
                      f"must be below server.timeout ({format_duration(s.timeout)})"))
    if (s.tls_cert is None) != (s.tls_key is None):
        found.append((("server.tlsCert", "server.tlsKey"), "tlsCert and tlsKey must be set together"))
    if p.rebalance_enabled and settings.alertmanager.url is None:
        found.append((("rebalance.enabled", "rebalance.alertmanagerUrl"),
                      "needs rebalance.alertmanagerUrl: donors are only those Alertmanager shows idle now"))
    if settings.confirm.enabled and settings.confirm.timeout >= s.notification_deadline:
        found.append((("confirm.timeout", "server.notificationDeadline"),
                      f"must be below server.notificationDeadline ({format_duration(s.notification_deadline)}): "
                      "the confirm request is part of a notification's work"))
    if p.rebalance_enabled and not p.rebalance_receiver_alerts:
        found.append((("rebalance.receiverAlerts",), "is empty: no alert would ever look for a donor"))
    if p.rebalance_enabled and not p.rebalance_donor_alerts:
        found.append((("rebalance.donorAlerts",), "is empty: no workload could ever show idle"))
    if _port(s.probe_listen) == _port(s.listen) != 0:
        found.append((("server.probeListen", "server.listen"),
                      f"must use another port than server.listen ({s.listen})"))
    return found


def warnings(settings: Settings) -> list[str]:
    """Valid settings that still make the reactor act nowhere, or act on whatever an alert claims: said at start
    and by `check-config`."""
    p = settings.policy
    found = []
    if not p.allow:
        found.append("namespaces.allow is empty: the reactor acts in no namespace (list namespaces, or '*' for all)")
    elif "*" not in p.allow and not any(p.namespace_allowed(n) for n in p.allow):
        found.append("every namespace in namespaces.allow is also denied (namespaces.deny): the reactor acts nowhere")
    if p.budget_global.actions == 0:
        found.append("budget.global.actions is 0: no action is ever taken")
    if not settings.confirm.enabled:
        found.append("confirm.enabled is false: alerts are acted on unconfirmed, so the reactor trusts whoever can "
                     "reach Alertmanager's API (anyone who can post an alert there can resize any allowed workload)")
    elif settings.confirm.url is None:
        found.append("confirm.prometheusUrl is not set: `reactor serve` refuses to start without the Prometheus the "
                     "rules run in (set it here or in REACTOR_CONFIRM__PROMETHEUS_URL; `reactor plan` and `reactor "
                     "report` do without)")
    return found


def require_confirm_url(settings: Settings) -> None:
    """`reactor serve` refuses to start without a Prometheus to confirm against, unless confirm is off."""
    if settings.confirm.enabled and settings.confirm.url is None:
        raise ConfigError("confirm.prometheusUrl", "required: every alert is confirmed against the Prometheus the "
                          "rules run in before any write (or set confirm.enabled: false, trusting whoever can reach "
                          "Alertmanager)")


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def load_settings(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the policy file (if any) and the `REACTOR_*` environment; raise `ConfigError` on anything wrong."""
    doc: Any = {}
    if path is not None:
        doc = read_yaml_file(path)
        doc = {} if doc is None else doc
    return build_settings(doc, os.environ if environ is None else environ, file=None if path is None else str(path))
