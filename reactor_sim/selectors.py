"""Label and field selectors as kube-apiserver parses them for LIST requests.

Pure parsing and matching; a selector the API server would reject raises SelectorError (a 400).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from reactor_sim import label_syntax

Matcher = Callable[[dict[str, Any]], bool]

_EQ_RE = re.compile(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(\S*)\s*$")


class SelectorError(ValueError):
    pass


def _split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def parse_labels(text: str | None) -> Callable[[dict[str, str]], bool]:
    """labels.Parse (see label_syntax): a predicate on a label map, or SelectorError (a 400)."""
    try:
        return label_syntax.parse(text or "")
    except ValueError as e:
        raise SelectorError(str(e)) from e


def match_label_selector(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels; empty matches all."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_expression_matches(expr, labels) for expr in selector.get("matchExpressions") or [])


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    return (key in labels) == (op == "Exists")


_SELECTOR_OPS = {"In": " in ", "NotIn": " notin ", "Exists": "", "DoesNotExist": ""}


def label_selector_string(selector: dict[str, Any] | None) -> str | None:
    """metav1 `LabelSelectorAsSelector(...).String()`; None where it errs (an unknown operator).

    nil → labels.Nothing(), {} → labels.Everything(): both print "". The requirements (matchLabels as `k=v`, then
    the expressions) are sorted by key (labels `internalSelector.Add`: `sort.Sort(ByKey)`; here a stable sort), an
    In/NotIn's values sorted (`Requirement.String` → `safeSort`), Exists `k`, DoesNotExist `!k`.
    """
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = [(str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op, key = expr.get("operator"), str(expr.get("key", ""))
        if op not in _SELECTOR_OPS:
            return None
        if op in ("In", "NotIn"):
            values = sorted(str(v) for v in expr.get("values") or [])
            reqs.append((key, f"{key}{_SELECTOR_OPS[op]}({','.join(values)})"))
        else:
            reqs.append((key, key if op == "Exists" else f"!{key}"))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def selector_string(selector: dict[str, Any] | None) -> str:
    """The label-selector string form (`a=b,c in (x)`) of a metav1.LabelSelector, as a scale's status.selector
    carries it (`LabelSelectorAsSelector(...).String()`); "" where it errs."""
    return label_selector_string(selector) or ""


COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
FIELDS_BY_RESOURCE: dict[str, frozenset[str]] = {
    "events": frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                         "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                         "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    "pods": frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                       "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}),
    "nodes": frozenset({"spec.unschedulable"}),
    "namespaces": frozenset({"status.phase"}),
    "replicasets": frozenset({"status.replicas"}),
    "jobs": frozenset({"status.successful"}),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if path == "source" and isinstance(node, dict):
        node = node.get("component")
    if isinstance(node, bool):
        return str(node).lower()
    return "" if node is None else str(node)


def parse_fields(text: str | None, plural: str) -> Matcher:
    """Field selector with `=`, `==`, `!=` on the fields upstream supports for this resource."""
    allowed = COMMON_FIELDS | FIELDS_BY_RESOURCE.get(plural, frozenset())
    tests: list[Matcher] = []
    for term in _split(text or ""):
        m = _EQ_RE.match(term)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        path, op, value = m.groups()
        if path not in allowed:
            raise SelectorError(f'field label not supported: {path}')
        tests.append(_field_test(path, value, negated=op == "!="))
    return lambda obj: all(t(obj) for t in tests)


def _field_test(path: str, value: str, *, negated: bool) -> Matcher:
    return lambda obj: (_field_value(obj, path) == value) != negated
