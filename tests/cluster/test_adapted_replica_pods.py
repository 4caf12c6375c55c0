"""adapted_workload's `replica_beside`: the pods of an operator's other templates that one replica more adds.

A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, v0.10.0) replica is a group: its leader, made from leaderTemplate where
set, and size − 1 workers from workerTemplate (pod_controller.go constructWorkerStatefulSetApplyConfiguration builds
the workers of every leader pod). A group more takes the leader's CPU and memory too, by the leader's own class.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor.cluster.adapted import adapted_workload
from reactor.core.model import ComputeResources
from reactor.integrations.adapters.lws import LEADER_WORKER_SET

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"


def _container(name: str, gpus: int, cpu: str) -> dict[str, Any]:
    amounts = {GPU: str(gpus), "cpu": cpu}
    return {"name": name, "image": "vllm:1", "resources": {"limits": dict(amounts), "requests": dict(amounts)}}


def _lws(*, leader: bool) -> dict[str, Any]:
    template: dict[str, Any] = {"size": 3, "workerTemplate": {"spec": {"priorityClassName": "medium-priority-gpu",
                                                                       "containers": [_container("worker", 4, "8")]}}}
    if leader:
        template["leaderTemplate"] = {"spec": {"priorityClassName": "high-priority-gpu",
                                               "containers": [_container("leader", 0, "2")]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "vllm", "namespace": "ml", "uid": "u-1", "resourceVersion": "5"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": template}}


def test_a_group_more_adds_the_leader_beside_the_workers() -> None:
    workload = adapted_workload(LEADER_WORKER_SET, _lws(leader=True), "worker", GPU)
    assert workload is not None and workload.operator is not None
    assert workload.operator.pods_per_replica == 2
    (leader,) = workload.operator.replica_beside
    assert (leader.template, leader.count, leader.priority_class) == ("leader", 1, "high-priority-gpu")
    assert leader.pods.cpu == ComputeResources(2000, 2000)


def test_without_a_leader_template_the_group_is_one_template() -> None:
    workload = adapted_workload(LEADER_WORKER_SET, _lws(leader=False), "worker", GPU)
    assert workload is not None and workload.operator is not None
    assert workload.operator.pods_per_replica == 3 and workload.operator.replica_beside == ()
