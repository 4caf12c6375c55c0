"""Kueue's ClusterQueue arithmetic, pure (issue 17): nominal quota summed over flavors, usage from status."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.kueue import cluster_queue_quota, tighter
from reactor.model import Bounds

GPU = "nvidia.com/gpu"


def _cq(flavors: list[tuple[str, Any]], usage: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"spec": {"resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
                {"name": name, "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": GPU, "nominalQuota": q}]}
                for name, q in flavors]}]},
            "status": {"flavorsUsage": [{"name": name, "resources": [{"name": GPU, "total": t}]} for name, t in usage]}}


@pytest.mark.parametrize(("cq", "expected"), [
    (_cq([("h100", 8)], [("h100", 3)]), (8, 3)),
    (_cq([("h100", "8"), ("a100", "4")], [("h100", "8"), ("a100", 1)]), (12, 9)),
    (_cq([("h100", 8)], []), (8, 0)),
    ({"spec": {"resourceGroups": [{"flavors": [{"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}},
     None),
    ({}, None),
], ids=["one-flavor", "two-flavors-string-quantities", "no-usage-yet", "no-gpu-quota", "empty"])
def test_cluster_queue_quota(cq: dict[str, Any], expected: tuple[int, int] | None) -> None:
    assert cluster_queue_quota(cq, GPU) == expected


@pytest.mark.parametrize(("bounds", "quota", "headroom"), [
    (Bounds(quota_hard=64, quota_used=8), (12, 9), 3),  # the ClusterQueue is tighter
    (Bounds(quota_hard=10, quota_used=9), (12, 0), 1),  # the namespace is tighter
    (Bounds(), (12, 4), 8),  # no namespace quota at all
    (Bounds(quota_hard=10, quota_used=2), None, 8),  # no GPU quota in the ClusterQueue
], ids=["cq-tighter", "namespace-tighter", "no-namespace-quota", "no-cq-quota"])
def test_the_tighter_quota_wins(bounds: Bounds, quota: tuple[int, int] | None, headroom: int) -> None:
    assert tighter(bounds, quota).headroom == headroom
