"""GPU and priority changes against the CPU and pod-count quota lines, over real HTTP against the embedded cluster.

The API server charges every pod it creates its whole CPU and memory requests and limits and one `pods`, to every
quota whose scope matches it (kube-apiserver pkg/quota/v1/evaluator/core/pods.go PodUsageFunc, the ResourceQuota
admission plugin), but admits the owner's patch whatever it will cost: a replica more whose pod the `requests.cpu`
line cannot take is a Deployment patched and a pod refused `exceeded quota` on every retry. The reactor checks those
lines itself, and the CPU an applied change takes is seen by the next decision of the same notification.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, Reactor, serving

GPU = build.GPU
SCALE_UP = {"GPUSaturated": ["scale-replicas-up"]}


def _trainer(name: str, replicas: int = 1, priority: str | None = None) -> build.Obj:
    return build.deployment(name, build.container(image="trainer:3", gpus=1, cpu="2", memory="4Gi"),
                            replicas=replicas, priority=priority)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    with build.start(build.namespace(), build.gpu_node(), priority_classes=True, settle=False) as sim:
        yield sim


def _saturated(r: Reactor, *apps: str) -> dict[str, Any]:
    """One notification: GPUSaturated for every pod of each app."""
    return notification([AlertSpec("GPUSaturated", NAMESPACE, pod, "main", 0.98, 1) for app in apps
                         for pod in r.pods(app)])


def _by_workload(answer: Any) -> list[dict[str, Any]]:
    """One outcome per workload (each alert of a workload's pods answers the same decision)."""
    return list({o["workload"]: o for o in answer.get_json()["outcomes"]}.values())


def _failed_creates(sim: SimCluster) -> list[str]:
    return [e["message"] for e in sim.list("events", NAMESPACE) if e["reason"] == "FailedCreate"]


def test_without_the_check_the_replica_is_patched_and_its_pod_refused(cluster: SimCluster) -> None:
    """Why the reactor must refuse: 8 GPUs of room, but requests.cpu 4 of 4 used. The API server takes the patch to
    3 replicas; the new pod fails `exceeded quota: compute, requested: requests.cpu=2` and never runs."""
    cluster.apply([_trainer("a", 2), build.quota("gpus", {f"requests.{GPU}": 8}),
                   build.quota("compute", {"requests.cpu": 4})])
    cluster.settle()
    cluster.apply(_trainer("a", 3))
    cluster.settle()
    assert len(cluster.list("pods", NAMESPACE, label_selector="app=a")) == 2
    failed = _failed_creates(cluster)
    assert failed and "exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=4, limited: " \
                      "requests.cpu=4" in failed[-1]


def test_a_replica_the_cpu_quota_cannot_take_is_refused_before_any_write(cluster: SimCluster,
                                                                          token_file: Path) -> None:
    """The same cluster through the reactor: refused as quota-exceeded naming the CPU line, the Deployment untouched,
    no pod refused."""
    cluster.apply([_trainer("a", 2), build.quota("gpus", {f"requests.{GPU}": 8}),
                   build.quota("compute", {"requests.cpu": 4})])
    cluster.settle()
    before = cluster.get("deployments", NAMESPACE, "a")["metadata"]["resourceVersion"]
    with serving(cluster, token_file, alerts=SCALE_UP) as r:
        (outcome,) = _by_workload(r.post(_saturated(r, "a")))
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert ("replicas 2→3 needs 2000m of requests.cpu of quota compute (1 pods more of 2000m each), headroom 0m "
            "(hard 4000m, used 4000m)") in outcome["detail"]
    assert cluster.get("deployments", NAMESPACE, "a")["metadata"]["resourceVersion"] == before
    assert not any(verb in ("patch", "update") for verb, *_ in cluster.requests)
    assert not _failed_creates(cluster)


def test_the_first_replica_takes_the_cpu_and_the_second_decision_sees_it(cluster: SimCluster,
                                                                         token_file: Path) -> None:
    """a and b, one pod each of 2 cores; requests.cpu 6 with 4 used: room for one pod more. One notification: the
    first grows and reserves its 2 cores; the second is refused naming what is left (0m), where without the
    reservation it would read the 2 cores still free in status.used and be patched into a refused pod."""
    cluster.apply([_trainer("a"), _trainer("b"), build.quota("compute", {"requests.cpu": 6, "pods": 10})])
    cluster.settle()
    with serving(cluster, token_file, alerts=SCALE_UP) as r:
        before = {key: cluster.requests.get(key, 0) for key in (("list", "resourcequotas", ""),
                                                                 ("list", "limitranges", ""))}
        outcomes = {o["workload"]: o for o in r.post(_saturated(r, "a", "b")).get_json()["outcomes"]}
    # The CPU lines come from the lists the GPU lines were read from: one of each per notification, both workloads.
    assert {key: cluster.requests.get(key, 0) - n for key, n in before.items()} == {
        ("list", "resourcequotas", ""): 1, ("list", "limitranges", ""): 1}
    first, second = (o for _, o in sorted(outcomes.items()))
    assert (first["result"], first["action"], first["to"]) == ("applied", "scale-replicas", 3 - 1)
    assert (second["result"], second["reason"]) == ("skipped", "quota-exceeded")
    assert ("replicas 1→2 needs 2000m of requests.cpu of quota compute (1 pods more of 2000m each), headroom 0m "
            "(hard 6000m, used 6000m)") in second["detail"]
    cluster.settle()
    assert cluster.get("resourcequotas", NAMESPACE, "compute")["status"]["used"] == {"requests.cpu": "6", "pods": "3"}
    assert not _failed_creates(cluster)


def test_a_priority_move_into_a_cpu_quota_scoped_to_the_new_class(cluster: SimCluster, token_file: Path) -> None:
    """2 medium pods of 2 cores; `high-cpu` (scoped to high-priority-gpu) holds 3 cores: set-priority-up would move
    both pods into it, 4 cores. Refused naming it; with 4 cores it is applied and both pods roll into it."""
    cluster.apply([_trainer("a", 2, "medium-priority-gpu"),
                   build.quota("high-cpu", {"requests.cpu": 3}, priority="high-priority-gpu")])
    cluster.settle()
    with serving(cluster, token_file, alerts={"GPUSaturated": ["set-priority-up"]}) as r:
        (refused,) = _by_workload(r.post(_saturated(r, "a")))
    assert (refused["result"], refused["reason"]) == ("skipped", "quota-exceeded")
    assert ("class medium-priority-gpu→high-priority-gpu needs 4000m of requests.cpu of quota high-cpu (replicas 2, "
            "surge 1 of 2000m each, every pod moves into its scope), headroom 3000m (hard 3000m, used 0m)"
            ) in refused["detail"]
    cluster.apply(build.quota("high-cpu", {"requests.cpu": 4}, priority="high-priority-gpu"))
    with serving(cluster, token_file, alerts={"GPUSaturated": ["set-priority-up"]}) as r:
        (applied,) = _by_workload(r.post(_saturated(r, "a")))
    assert (applied["result"], applied["to"]) == ("applied", "high-priority-gpu"), applied
    cluster.settle()
    pods = cluster.list("pods", NAMESPACE, label_selector="app=a")
    assert sorted(p["spec"].get("priorityClassName") for p in pods) == ["high-priority-gpu"] * 2
    assert not _failed_creates(cluster)


def test_a_template_without_cpu_is_charged_the_limit_range_default(cluster: SimCluster, token_file: Path) -> None:
    """The trainer sets only its GPU; the namespace's LimitRange fills 1 core into every container at admission, so
    two pods use the 2 cores of requests.cpu. Counting the template as written (0 cores) would patch a replica more
    whose pod the API server then refuses; counting what LimitRanger fills in refuses it first."""
    cluster.apply([build.limit_range("defaults", {"type": "Container", "default": {"cpu": "1"},
                                                  "defaultRequest": {"cpu": "1"}}),
                   build.deployment("a", build.container(image="trainer:3", gpus=1), replicas=2),
                   build.quota("compute", {"requests.cpu": 2})])
    cluster.settle()
    assert cluster.get("resourcequotas", NAMESPACE, "compute")["status"]["used"] == {"requests.cpu": "2"}
    with serving(cluster, token_file, alerts=SCALE_UP) as r:
        (outcome,) = _by_workload(r.post(_saturated(r, "a")))
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "needs 1000m of requests.cpu of quota compute (1 pods more of 1000m each), headroom 0m" in outcome["detail"]
    assert not any(verb in ("patch", "update") for verb, *_ in cluster.requests)
    cluster.apply(build.deployment("a", build.container(image="trainer:3", gpus=1), replicas=3))
    cluster.settle()
    assert "exceeded quota: compute, requested: requests.cpu=1" in _failed_creates(cluster)[-1]
