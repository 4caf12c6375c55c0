"""CPU quota over real HTTP against the embedded cluster: reserved across the workloads of one notification, and
scope-aware (a quota scoped to a PriorityClass counts only that class's pods), as the GPU's is.

The API server charges an in-place resize its growth against every quota whose scope matches the pod (the
ResourceQuota admission plugin's checkRequest on pods/resize), so a raise the reactor let through on a stale
`status.used` would be answered 403 and leave the workload starved; one it refused for another class's quota
would be a raise withheld for nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.app.cli import main
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, Reactor, serving


def _trainer(name: str, replicas: int, priority: str | None = None) -> build.Obj:
    main = build.container(image="trainer:3", gpus=1, cpu="2", memory="8Gi", resize={"cpu": "NotRequired"})
    return build.deployment(name, main, replicas=replicas, priority=priority)


def _quota(name: str, cores: int, priority: str | None = None) -> build.Obj:
    return build.quota(name, {"requests.cpu": cores, "limits.cpu": cores}, priority=priority)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    with build.start(build.namespace(), build.gpu_node(), priority_classes=True, settle=False) as sim:
        yield sim


def _starved(r: Reactor, *apps: str) -> dict[str, Any]:
    """One notification: GPUStarvedByCPU (throttled half the time) for every pod of each app."""
    specs = [AlertSpec("GPUStarvedByCPU", NAMESPACE, pod, "main", 0.2, 1, extra_annotations={"cpu_throttling": "0.5"})
             for app in apps for pod in r.pods(app)]
    return notification(specs)


def _cpu(sim: SimCluster, app: str) -> set[str]:
    return {p["spec"]["containers"][0]["resources"]["limits"]["cpu"]
            for p in sim.list("pods", NAMESPACE, label_selector=f"app={app}")}


def test_two_starved_workloads_share_the_quota_the_first_takes_it(cluster: SimCluster, token_file: Path) -> None:
    """4 pods × 2 cores use 8 of 10: raising a's 2 pods to 3 cores takes the last 2 of both lines, and b,
    in the same notification, is refused naming the quota and what is left, instead of a 403 per pod."""
    cluster.apply([_trainer("a", 2), _trainer("b", 2), _quota("compute", 10)])
    cluster.settle()
    with serving(cluster, token_file) as r:
        outcomes = {o["workload"]: o for o in r.post(_starved(r, "a", "b")).get_json()["outcomes"]}
    first, second = (o for _, o in sorted(outcomes.items()))
    assert (first["result"], first["action"], first["from"], first["to"]) == ("applied", "resize-cpu", "2000m",
                                                                              "3000m")
    assert (second["result"], second["reason"]) == ("skipped", "quota-exceeded")
    assert ("main CPU 2000m→3000m needs 2000m of limits.cpu of quota compute (2 pods, surge 0), headroom 0m "
            "(hard 10000m, used 10000m)") in second["detail"]
    cluster.settle()
    assert _cpu(cluster, "a") == {"3"} and _cpu(cluster, "b") == {"2"}
    assert cluster.get("resourcequotas", NAMESPACE, "compute")["status"]["used"] == {"requests.cpu": "10",
                                                                                     "limits.cpu": "10"}
    assert cluster.requests.get(("patch", "pods", "resize")) == 2, "no resize was sent to be refused"


def test_a_quota_scoped_to_a_priority_class_counts_only_its_pods(cluster: SimCluster, token_file: Path) -> None:
    """`high-cpu` (PriorityClass high-priority-gpu, 2 cores) is full with a's one pod: a is refused naming it;
    b's pods have no class, so high-cpu neither limits nor counts them: b is raised in place, and the API server
    admits its resizes (it too charges only the quotas whose scope matches the pod)."""
    cluster.apply([_trainer("a", 1, "high-priority-gpu"), _trainer("b", 2), _quota("high-cpu", 2, "high-priority-gpu")])
    cluster.settle()
    with serving(cluster, token_file) as r:
        outcomes = {o["workload"]: o for o in r.post(_starved(r, "a", "b")).get_json()["outcomes"]}
    a, b = (o for _, o in sorted(outcomes.items()))
    assert (a["result"], a["reason"]) == ("skipped", "quota-exceeded")
    assert "of quota high-cpu (1 pods, surge 0), headroom 0m (hard 2000m, used 2000m)" in a["detail"]
    assert (b["result"], b["action"], b["to"]) == ("applied", "resize-cpu", "3000m")
    cluster.settle()
    assert _cpu(cluster, "a") == {"2"} and _cpu(cluster, "b") == {"3"}
    assert cluster.get("resourcequotas", NAMESPACE, "high-cpu")["status"]["used"] == {"requests.cpu": "2",
                                                                                      "limits.cpu": "2"}


def test_reactor_plan_names_the_cpu_quota_it_would_exceed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`reactor plan` runs the same engine in dry run: a raise the CPU quota cannot take is planned as
    `quota-exceeded` naming the quota, not as an action the real run would then be refused."""
    seed = tmp_path / "cluster.yaml"
    docs = [build.namespace(), build.gpu_node(), _trainer("a", 2), _quota("compute", 5)]
    seed.write_text(yaml.safe_dump_all([*yaml.safe_load_all(build.PRIORITY_CLASSES.read_text()), *docs]))
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"namespaces: {{allow: [{NAMESPACE}]}}\n")
    with SimCluster().start() as sim:  # only to learn the pod names the seed's Deployment gets
        sim.apply(docs)
        sim.settle()
        pods = [p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector="app=a")]
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps(notification([
        AlertSpec("GPUStarvedByCPU", NAMESPACE, pod, "main", 0.2, 1, extra_annotations={"cpu_throttling": "0.5"})
        for pod in pods])))
    assert main(["plan", "--alerts", str(alerts), "--config", str(policy), "--seed", str(seed),
                 "--output", "json"]) == 0
    outcomes = json.loads(capsys.readouterr().out)["outcomes"]
    assert outcomes and {(o["result"], o["reason"]) for o in outcomes} == {("skipped", "quota-exceeded")}, outcomes
    assert all("compute" in (o.get("detail") or "") for o in outcomes)
