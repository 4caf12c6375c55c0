"""The one settings object: a YAML policy file plus `REACTOR_*` environment overrides, validated once.

Every key has a default and a bound; a bad value is a `ConfigError` naming the key.
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

import yaml

from .errors import ConfigError
from .fields import boolean, bounded, choice, duration_in, listen, names, opt_str, read_yaml_file, resource
from .model import KNOWN_ALERTS, Mode
from .policy.values import DEFAULT_ALERTS, REVERTIBLE, STRATEGIES, Policy, Window


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
    watch_cache: bool = False  # read the cached kinds from list+watch informers (reactor/informer.py)


@dataclass(frozen=True, slots=True)
class Settings:
    policy: Policy = field(default_factory=Policy)
    server: Server = field(default_factory=Server)
    kube: Kube = field(default_factory=Kube)
    log_format: str = "json"
    log_level: str = "INFO"


def _mode(key: str, raw: Any) -> Mode:
    return Mode(choice(*(m.value for m in Mode))(key, raw))


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
                raise ConfigError(
                    f"{key}.{name}[{i}]", f"unknown strategy {s!r}; known: {', '.join(sorted(STRATEGIES))}"
                )
        merged[name] = tuple(strategies)
    return MappingProxyType(merged)


def _revert(key: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise ConfigError(key, "expected a list of strategies whose effect is undone when the alert resolves")
    for i, s in enumerate(raw):
        if s not in REVERTIBLE:
            raise ConfigError(f"{key}[{i}]", f"not revertible: {s!r}; revertible: {', '.join(sorted(REVERTIBLE))}")
    return tuple(raw)


def _window(key: str, raw: Any) -> Window:
    if not isinstance(raw, dict) or set(raw) - {"actions", "per"}:
        raise ConfigError(key, "expected {actions: N, per: DURATION}")
    actions = bounded(int, 0, 10_000)(f"{key}.actions", raw.get("actions", 0))
    per = duration_in(timedelta(seconds=1), timedelta(days=1))(f"{key}.per", raw.get("per", "10m"))
    return Window(actions, per)


# The schema: YAML path -> (section, field, parser). The environment override of a path is
# REACTOR_ + its parts in upper snake case joined by "__", e.g. REACTOR_BUDGET__GLOBAL.
_SCHEMA: dict[str, tuple[str, str, Callable[[str, Any], Any]]] = {
    "dryRun": ("policy", "dry_run", boolean),
    "gpuResource": ("policy", "gpu_resource", resource),
    "namespaces.allow": ("policy", "allow", lambda k, v: names(k, v, star=True)),
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
    "server.probeListen": ("server", "probe_listen", listen),
    "server.readTimeout": ("server", "read_timeout", duration_in(timedelta(seconds=1), timedelta(minutes=5))),
    "kube.kubeconfig": ("kube", "kubeconfig", opt_str),
    "kube.context": ("kube", "context", opt_str),
    "kube.qps": ("kube", "qps", bounded(float, 0.1, 10_000)),
    "kube.burst": ("kube", "burst", bounded(int, 1, 100_000)),
    "kube.timeout": ("kube", "timeout", duration_in(timedelta(seconds=1), timedelta(minutes=5))),
    "kube.conflictRetries": ("kube", "conflict_retries", bounded(int, 0, 20)),
    "kube.watchCache": ("kube", "watch_cache", boolean),
    "logging.format": ("top", "log_format", choice("json", "text")),
    "logging.level": ("top", "log_level", choice("DEBUG", "INFO", "WARNING", "ERROR")),
}
_SECTIONS = {"namespaces", "gpus", "replicas", "budget", "server", "kube", "logging", "state"}


def env_name(path: str) -> str:
    parts = [re.sub(r"(?<!^)(?=[A-Z])", "_", p).upper() for p in path.split(".")]
    return "REACTOR_" + "__".join(parts)


def _flatten(doc: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if not isinstance(key, str):
            raise ConfigError(str(key), "keys must be strings")
        if key in _SECTIONS and key not in _SCHEMA:
            if not isinstance(value, dict):
                raise ConfigError(key, "expected a mapping")
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = subvalue
        else:
            flat[key] = value
    for key in flat:
        if key not in _SCHEMA:
            raise ConfigError(key, "unknown key (see the README's policy reference)")
    return flat


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in _SCHEMA:
        name = env_name(path)
        if name in environ:
            try:
                found[path] = yaml.safe_load(environ[name])
            except yaml.YAMLError as e:
                raise ConfigError(name, f"not a YAML value: {e}") from e
    return found


def build_settings(doc: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Validate a parsed policy document (+ environment overrides) into `Settings`."""
    if not isinstance(doc, dict):
        raise ConfigError("(top)", "the policy file must be a YAML mapping")
    flat = _flatten(doc)
    flat.update(_from_env(environ or {}))
    values: dict[str, dict[str, Any]] = {"policy": {}, "server": {}, "kube": {}, "top": {}}
    for path, raw in flat.items():
        section, name, parse = _SCHEMA[path]
        values[section][name] = parse(path, raw)
    policy = Policy(**values["policy"])
    _check_policy(policy)
    server = Server(**values["server"])
    if server.notification_deadline >= server.timeout:
        raise ConfigError("server.notificationDeadline", f"must be below server.timeout ({server.timeout})")
    if (server.tls_cert is None) != (server.tls_key is None):
        raise ConfigError("server.tlsCert", "tlsCert and tlsKey must be set together")
    if _port(server.probe_listen) == _port(server.listen) != 0:
        raise ConfigError("server.probeListen", f"must use another port than server.listen ({server.listen})")
    return Settings(policy=policy, server=server, kube=Kube(**values["kube"]), **values["top"])


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _check_policy(p: Policy) -> None:
    if p.min_gpus > p.max_gpus:
        raise ConfigError("gpus.min", f"must not exceed gpus.max ({p.max_gpus})")
    if p.min_replicas > p.max_replicas:
        raise ConfigError("replicas.min", f"must not exceed replicas.max ({p.max_replicas})")
    if len(set(p.priority_ladder)) != len(p.priority_ladder):
        raise ConfigError("priorityLadder", "lists a class twice")
    if p.reverse_after < p.cooldown:
        raise ConfigError("reverseAfter", f"must be at least the cooldown ({p.cooldown})")


def load_settings(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the policy file (if any) and the `REACTOR_*` environment; raise `ConfigError` on anything wrong."""
    doc: Any = {}
    if path is not None:
        doc = read_yaml_file(path)
        doc = {} if doc is None else doc
    return build_settings(doc, os.environ if environ is None else environ)
