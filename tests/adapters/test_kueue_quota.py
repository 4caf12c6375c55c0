"""Kueue's ClusterQueue arithmetic, pure (issue 17): nominal quota summed over flavors, usage from status."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.core.model import Bounds, Quota
from reactor.integrations.kueue import cluster_queue_quota, with_cluster_queue

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


NS_QUOTA = Quota("gpu-quota", hard=10, used=2)


def test_the_cluster_queue_is_one_more_quota_the_pods_count_against() -> None:
    """Every quota that counts the pods must hold a change, so whichever of the namespace's and the
    ClusterQueue's leaves less room decides."""
    bounds = with_cluster_queue(Bounds(quotas=(NS_QUOTA,)), (12, 9), "team-a")
    assert bounds.quotas == (NS_QUOTA, Quota("ClusterQueue of LocalQueue team-a", hard=12, used=9))
    assert with_cluster_queue(Bounds(quotas=(NS_QUOTA,)), None, "team-a").quotas == (NS_QUOTA,)
    assert with_cluster_queue(Bounds(), (12, 4), "q").quotas == (Quota("ClusterQueue of LocalQueue q", 12, 4),)
