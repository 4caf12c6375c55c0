"""Alertmanager's routing and inhibition, re-enacted on its loaded config: which receivers an alert reaches.

Pure: takes the parsed config (from /api/v2/status) and a label set. Follows Alertmanager's rules: the
root route matches everything; children are tried in order, the first match wins unless it sets
`continue`; a route with no matching child delivers itself. Matchers: `matchers` (=, !=, =~, !~; regexes
anchored: the one parser of reactor/tools/matchers.py), and the deprecated `match` / `match_re`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reactor.tools.matchers import Matcher, parse_matcher

Labels = Mapping[str, str]
def route_matchers(route: Mapping[str, Any]) -> list[Matcher]:
    out = [parse_matcher(m) for m in route.get("matchers") or []]
    out += [Matcher(k, "=", str(v)) for k, v in (route.get("match") or {}).items()]
    out += [Matcher(k, "=~", str(v)) for k, v in (route.get("match_re") or {}).items()]
    return out


@dataclass(frozen=True, slots=True)
class Delivery:
    """A route that takes the alert: its receiver and the matchers on the way there."""

    receiver: str
    path: tuple[Matcher, ...]


Path = tuple[Matcher, ...]


def deliveries(route: Mapping[str, Any], labels: Labels, *, inherited: str = "", path: Path = ()) -> list[Delivery]:
    receiver = route.get("receiver") or inherited
    found: list[Delivery] = []
    for child in route.get("routes") or []:
        matchers = route_matchers(child)
        if all(m.admits(labels) for m in matchers):
            found += deliveries(child, labels, inherited=receiver, path=path + tuple(matchers))
            if not child.get("continue", False):
                break
    return found or [Delivery(receiver, path)]


def near_misses(route: Mapping[str, Any], labels: Labels, *, path: Path = ()) -> list[Path]:
    """Routes that would take the alert but for matchers on labels other than `reactor` (e.g. a namespace
    matcher added by prometheus-operator's OnNamespace strategy)."""
    out: list[Path] = []
    for child in route.get("routes") or []:
        matchers = route_matchers(child)
        here = path + tuple(matchers)
        ours = any(m.name == "reactor" and m.admits(labels) for m in matchers)
        if ours and not all(m.admits(labels) for m in matchers):
            out.append(here)
        out += near_misses(child, labels, path=here)
    return out


def inhibited_by(config: Mapping[str, Any], labels: Labels) -> list[dict[str, Any]]:
    """Inhibit rules whose target matchers match the alert (they mute it while a matching source fires)."""
    rules = []
    for rule in config.get("inhibit_rules") or []:
        targets = [parse_matcher(m) for m in rule.get("target_matchers") or []]
        targets += [Matcher(k, "=", str(v)) for k, v in (rule.get("target_match") or {}).items()]
        targets += [Matcher(k, "=~", str(v)) for k, v in (rule.get("target_match_re") or {}).items()]
        if targets and all(m.admits(labels) for m in targets):
            rules.append(rule)
    return rules


def receiver(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for r in config.get("receivers") or []:
        if r.get("name") == name:
            return dict(r)
    return {}
