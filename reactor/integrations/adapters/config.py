"""The policy's `adapters` section: which built-in adapters are on, and adapters a platform team defines.

A user-defined adapter names its kind (group, version, kind, plural), the kinds its operator creates
with a controller reference (and, optionally, the label it puts on them), the path of its pod spec,
and optionally of its replica count. Every value is checked at start with a message naming the key;
nothing here reads the cluster.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from reactor.core.errors import ConfigError
from reactor.integrations.adapters.base import Adapter, Part, Path
from reactor.integrations.adapters.builtin import BUILTIN
from reactor.integrations.adapters.custom import CustomAdapter
from reactor.integrations.adapters.ray import RayServiceAdapter

_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_PLURAL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*|[0-9]{1,4})$")
_LABEL = re.compile(r"^([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
CHILD_KINDS = frozenset({"Pod", "Deployment", "StatefulSet", "Job"})
RESERVED_KINDS = frozenset({"Pod", "ReplicaSet", "Deployment", "StatefulSet", "Job", "CronJob"})
_KEYS = {"kind", "group", "version", "plural", "children", "ownerLabel", "podSpec", "replicas", "childName"}
# `childName`: the name the operator gives its child, `{owner}` standing for the resource's name ("{owner}",
# "{owner}-workers"): a DNS subdomain once filled in. Without it a link cannot be confirmed from the owner's side.
_CHILD_NAME = re.compile(r"^[a-z0-9.-]*\{owner\}[a-z0-9.-]*$")
BUILTIN_NAMES = tuple(a.kind for a in BUILTIN)
ADAPTER_KEYS = frozenset(_KEYS)


def parse_builtin(key: str, raw: Any) -> tuple[str, ...]:
    """The built-in adapters to enable, by kind; `[]` turns them all off."""
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise ConfigError(key, f"expected a list of kinds among {', '.join(BUILTIN_NAMES)}")
    unknown = [k for k in raw if k not in BUILTIN_NAMES]
    if unknown:
        raise ConfigError(key, f"no built-in adapter for {unknown[0]!r}; built-in: {', '.join(BUILTIN_NAMES)}")
    kinds = tuple(dict.fromkeys(raw))
    for outer in BUILTIN:
        needs = [a.kind for a in BUILTIN if a.kind in outer.children and a.kind not in kinds]
        if outer.kind in kinds and needs:
            raise ConfigError(key, f"{outer.kind} needs {needs[0]} too: its pods are found through the {needs[0]} "
                                   f"its operator builds")
    return kinds


def parse_custom(key: str, raw: Any) -> tuple[Adapter, ...]:
    """User-defined adapters, each validated; kinds are unique and never a built-in workload kind."""
    if not isinstance(raw, list):
        raise ConfigError(key, "expected a list of adapters (kind, group, version, plural, children, podSpec)")
    adapters = tuple(_adapter(f"{key}[{i}]", entry) for i, entry in enumerate(raw))
    kinds = [a.kind for a in adapters]
    for i, kind in enumerate(kinds):
        if kind in kinds[:i] or kind in BUILTIN_NAMES:
            raise ConfigError(f"{key}[{i}].kind", f"{kind} has an adapter already")
    return adapters


def parse_incremental_gate(key: str, raw: Any) -> bool | None:
    """Whether KubeRay's RayServiceIncrementalUpgrade feature gate is on in the cluster (true, false, or null for
    not declared): the operator's process flag, which the reactor cannot read (ray.py `RayServiceAdapter.forbidden`)."""
    if raw is None or isinstance(raw, bool):
        return raw
    raise ConfigError(key, f"expected true, false or null (KubeRay's RayServiceIncrementalUpgrade gate), got {raw!r}")


def parse_zero_downtime(key: str, raw: Any) -> bool | None:
    """What KubeRay's ENABLE_ZERO_DOWNTIME is in the cluster (true: unset or anything but "false"; false; null for not
    declared): the operator's environment, which the reactor cannot read (ray.py `RayServiceAdapter.forbidden`)."""
    if raw is None or isinstance(raw, bool):
        return raw
    raise ConfigError(key, f"expected true, false or null (KubeRay's ENABLE_ZERO_DOWNTIME), got {raw!r}")


KUEUE_RELEASE = re.compile(r"^v?(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$")


def parse_kueue_version(key: str, raw: Any) -> tuple[int, int, int] | None:
    """The Kueue release installed ("v0.16.2"; null for not declared): what Kueue's StatefulSet integration does with
    a priority label changed differs between patch releases that serve the same API versions (kueue.py)."""
    match = KUEUE_RELEASE.match(raw) if isinstance(raw, str) else None
    if raw is None:
        return None
    if match is None:
        raise ConfigError(key, f"expected a Kueue release such as v0.16.2, or null, got {raw!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def enabled(builtin: tuple[str, ...], custom: tuple[Adapter, ...], *,
            ray_incremental_gate: bool | None = None, ray_zero_downtime: bool | None = None) -> tuple[Adapter, ...]:
    """The enabled adapters; the RayService adapter told what the policy declares of KubeRay's gate and of its
    ENABLE_ZERO_DOWNTIME."""
    def configured(adapter: Adapter) -> Adapter:
        if not isinstance(adapter, RayServiceAdapter):
            return adapter
        return dataclasses.replace(adapter, incremental_gate=ray_incremental_gate, zero_downtime=ray_zero_downtime)
    return tuple(configured(a) for a in BUILTIN if a.kind in builtin) + custom


def _adapter(key: str, entry: Any) -> Adapter:
    if not isinstance(entry, Mapping):
        raise ConfigError(key, "expected a mapping")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", f"unknown key; known: {', '.join(sorted(_KEYS))}")
    kind = _text(key, entry, "kind", _KIND, "a Kind in CamelCase")
    if kind in RESERVED_KINDS:
        raise ConfigError(f"{key}.kind", f"{kind} is a built-in workload kind, not an operator's resource")
    spec_path = _path(f"{key}.podSpec", entry.get("podSpec"))
    replicas = None if entry.get("replicas") is None else _path(f"{key}.replicas", entry["replicas"])
    if replicas is not None and replicas[1] != spec_path[1]:
        raise ConfigError(f"{key}.replicas", f"must lie under spec.{spec_path[1]} like podSpec (one subtree is "
                                             f"written whole by a merge patch)")
    return CustomAdapter(kind, _text(key, entry, "group", _GROUP, "an API group (a DNS subdomain with a dot)"),
                         _text(key, entry, "version", _VERSION, "an API version such as v1 or v1beta2"),
                         _text(key, entry, "plural", _PLURAL, "the lowercase plural resource name"),
                         _children(f"{key}.children", entry.get("children")),
                         owner_label=_owner_label(f"{key}.ownerLabel", entry.get("ownerLabel")),
                         template=Part("", spec_path, replicas),
                         child_name=_child_name(f"{key}.childName", entry.get("childName")))


def _text(key: str, entry: Mapping[str, Any], name: str, pattern: re.Pattern[str], what: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not pattern.match(value):
        raise ConfigError(f"{key}.{name}", f"expected {what}, got {value!r}")
    return value


def _path(key: str, raw: Any) -> Path:
    """`spec.worker.template.spec` (numbers index lists): under `spec`, at least two steps deep."""
    if not isinstance(raw, str):
        raise ConfigError(key, f"expected a dotted path such as spec.template.spec, got {raw!r}")
    steps = raw.split(".")
    if len(steps) < 2 or steps[0] != "spec" or not all(_SEGMENT.match(s) for s in steps) or steps[1].isdigit():
        raise ConfigError(key, f"expected a dotted path under spec such as spec.template.spec, got {raw!r}")
    return tuple(int(s) if s.isdigit() else s for s in steps)


def _children(key: str, raw: Any) -> frozenset[str]:
    if not isinstance(raw, list) or not raw or not all(isinstance(k, str) for k in raw):
        raise ConfigError(key, f"expected a non-empty list among {', '.join(sorted(CHILD_KINDS))}")
    unknown = [k for k in raw if k not in CHILD_KINDS]
    if unknown:
        raise ConfigError(key, f"{unknown[0]!r} is not a kind an operator's pods come through; "
                               f"one of {', '.join(sorted(CHILD_KINDS))}")
    return frozenset(raw)


def _child_name(key: str, raw: Any) -> str | None:
    """The declared naming rule, or None: the adapter's links are then believed for recommendations only."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not _CHILD_NAME.match(raw) or raw.count("{owner}") != 1 or len(raw) > 200:
        raise ConfigError(key, f"expected the child's name with {{owner}} for the resource's name, such as "
                               f"'{{owner}}' or '{{owner}}-workers', got {raw!r}")
    return raw


def _owner_label(key: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or not _LABEL.match(raw):
        raise ConfigError(key, f"expected a label key, got {raw!r}")
    return raw
