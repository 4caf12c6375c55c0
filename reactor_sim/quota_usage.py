"""Incremental pod usage for ResourceQuota status.used: sums kept per namespace and quota shape
(hard keys and scopes), updated on every pod create/update/delete instead of recounted over the
namespace's pods on each write, as the resource-quota controller's informer-fed evaluator avoids too.

It only sums what `contribution` says a pod counts against a quota; it never reads the store itself
(the first use recounts through the caller's `recount`) and does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from reactor_sim.history import Change

Obj = dict[str, Any]
Totals = dict[str, Fraction]
SHAPE_CACHE = 1024
Contribution = Callable[[Obj, Obj], Totals]  # (quota, pod) -> what the pod adds to that quota's keys


class QuotaUsage:
    def __init__(self, contribution: Contribution) -> None:
        self.contribution = contribution
        self._sums: dict[str, dict[str, tuple[Obj, Totals]]] = {}  # namespace -> shape -> (quota, totals)
        self._shapes: dict[int, tuple[Obj, str]] = {}

    def shape(self, quota: Obj) -> str:
        """The quota's hard keys and scopes as a key; remembered per spec object (stored specs never change)."""
        spec = quota.get("spec") or {}
        known = self._shapes.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        if len(self._shapes) >= SHAPE_CACHE:
            self._shapes.clear()
        shape = json.dumps([sorted(spec.get("hard") or {}), spec.get("scopes"), spec.get("scopeSelector")])
        self._shapes[id(spec)] = (spec, shape)
        return shape

    def totals(self, quota: Obj, recount: Callable[[], Totals]) -> Totals:
        """The pod usage for this quota: kept sums, or `recount()` the first time this shape is seen."""
        ns, shape = quota["metadata"]["namespace"], self.shape(quota)
        kept = self._sums.setdefault(ns, {}).get(shape)
        if kept is None:
            kept = ({"spec": quota.get("spec") or {}}, dict(recount()))
            self._sums[ns][shape] = kept
        return dict(kept[1])

    def observe(self, plural: str, change: Change) -> None:
        if plural != "pods":
            return
        pod = change.obj if change.obj is not None else change.prev
        assert pod is not None
        if _same_usage(change.prev, change.obj):
            return
        for quota, totals in self._sums.get(pod["metadata"].get("namespace") or "", {}).values():
            if change.prev is not None:
                _add(totals, self.contribution(quota, change.prev), -1)
            if change.obj is not None:
                _add(totals, self.contribution(quota, change.obj), 1)


def _same_usage(prev: Obj | None, obj: Obj | None) -> bool:
    """A write that leaves spec and phase alone (binding aside) changes no quota's usage: what a pod counts
    and which scopes match it come from its spec and phase only."""
    if prev is None or obj is None:
        return False
    if (prev.get("status") or {}).get("phase") != (obj.get("status") or {}).get("phase"):
        return False
    before, after = prev.get("spec") or {}, obj.get("spec") or {}
    return before is after or {**before, "nodeName": None} == {**after, "nodeName": None}


def _add(totals: Totals, amounts: Totals, sign: int) -> None:
    for key, value in amounts.items():
        if key in totals:
            totals[key] += sign * value
