"""RayCluster v1 over HTTP with the CRD installed (issue 17): KubeRay creates the pods itself, labelled with
their group, so an alert on a worker changes that worker group (its template, its replicas) and nothing else.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.integrations.adapters.ray import ALLOW_RECREATE
from reactor.state.annotations import LAST_ACTION, ORIGINAL
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import GPU, container, custom, install, owner_ref, ray_pod_name, reconcile_ray
from tests.adapters.steps import post
from tests.adapters.workloads import ray_group
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

WORKER = "ray-gpu-workers-worker-00000"


@pytest.fixture
def cluster(reactor: Reactor) -> dict[str, Any]:
    return _cluster(reactor)


def _cluster(reactor: Reactor, **spec: Any) -> dict[str, Any]:
    """A RayCluster whose template changes reach its pods (upgradeStrategy Recreate, KubeRay v1.6+), unless `spec`
    says otherwise; its owners accept that each restarts the whole cluster (the allow-recreate annotation)."""
    install(reactor.sim, "ray.io_rayclusters.yaml")
    spec = {"upgradeStrategy": {"type": "Recreate"}, **spec}
    reactor.sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": {ALLOW_RECREATE: "true"}},
                       "spec": {"rayVersion": "2.40.0", **{k: v for k, v in spec.items() if v is not None},
                                "headGroupSpec": {"rayStartParams": {},
                                                  "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                                "workerGroupSpecs": [ray_group("gpu-workers", 4, 2, "medium-priority-gpu"),
                                                     ray_group("cpu-workers", 0, 1, "medium-priority-gpu")]}})
    reconcile_ray(reactor.sim, "ray")
    return custom(reactor.sim, "rayclusters", "ray")


def _post(reactor: Reactor, name: str, pod: str = WORKER, **kw: Any) -> dict[str, Any]:
    return post(reactor, name, pod, "ray-worker", **kw)


def _groups(reactor: Reactor) -> list[dict[str, Any]]:
    return custom(reactor.sim, "rayclusters", "ray")["spec"]["workerGroupSpecs"]


def _gpus(group: dict[str, Any]) -> str:
    return group["template"]["spec"]["containers"][0]["resources"]["limits"][GPU]


def test_an_underused_worker_group_shrinks_and_the_other_groups_stay(reactor: Reactor, cluster: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"RayCluster/{NAMESPACE}/ray"), outcome
    groups = _groups(reactor)
    assert _gpus(groups[0]) == "1"
    assert groups[1] == cluster["spec"]["workerGroupSpecs"][1]
    assert custom(reactor.sim, "rayclusters", "ray")["spec"]["headGroupSpec"] == cluster["spec"]["headGroupSpec"]


def test_an_idle_worker_group_scales_down(reactor: Reactor, cluster: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert outcome["result"] == "applied", outcome
    assert [g["replicas"] for g in _groups(reactor)] == [1, 1]


def test_a_saturated_worker_group_grows_then_reverts(reactor: Reactor, cluster: dict[str, Any]) -> None:
    assert _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4)["result"] == "applied"
    assert int(_gpus(_groups(reactor)[0])) > 4
    reconcile_ray(reactor.sim, "ray")
    outcome = _post(reactor, "GPUMemorySaturated", value=0.97, gpus=4, status="resolved")
    assert (outcome["result"], outcome.get("action")) == ("applied", "revert"), outcome
    assert _gpus(_groups(reactor)[0]) == "4"


def test_a_starved_worker_group_moves_up_the_ladder(reactor: Reactor, cluster: dict[str, Any]) -> None:
    assert _post(reactor, "GPUSaturated", value=0.99, gpus=4)["result"] == "applied"
    assert _groups(reactor)[0]["template"]["spec"]["priorityClassName"] == "high-priority-gpu"
    assert _groups(reactor)[1]["template"]["spec"]["priorityClassName"] == "medium-priority-gpu"


def test_a_change_kuberay_has_not_observed_refuses(reactor: Reactor, cluster: dict[str, Any]) -> None:
    rc = custom(reactor.sim, "rayclusters", "ray")
    rc["spec"]["rayVersion"] = "2.41.0"
    reactor.sim.apply(rc)  # generation 2; KubeRay has observed 1
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "rollout-in-progress" and "observed generation 1 of 2" in outcome["detail"]
    assert _gpus(_groups(reactor)[0]) == "4"


def test_a_pod_of_a_group_the_cluster_no_longer_has_is_refused(reactor: Reactor, cluster: dict[str, Any]) -> None:
    rc = custom(reactor.sim, "rayclusters", "ray")
    rc["spec"]["workerGroupSpecs"][0]["groupName"] = "renamed"
    reactor.sim.apply(rc)
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and "no group 'gpu-workers'" in outcome["detail"], outcome


def test_recreate_replaces_every_pod_head_included(reactor: Reactor, cluster: dict[str, Any]) -> None:
    """KubeRay's Recreate (the fixture plays shouldRecreatePodsForUpgrade): the whole cluster restarts with the
    change, so the pods that carry it are new ones, head included."""
    before = {p["metadata"]["uid"] for p in reactor.sim.list("pods", NAMESPACE, label_selector="ray.io/cluster=ray")}
    assert _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)["result"] == "applied"
    reconcile_ray(reactor.sim, "ray")
    pods = reactor.sim.list("pods", NAMESPACE, label_selector="ray.io/cluster=ray")
    assert not before & {p["metadata"]["uid"] for p in pods}
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] == "gpu-workers"]
    assert {c["resources"]["limits"][GPU] for p in workers for c in p["spec"]["containers"]} == {"1"}


@pytest.mark.parametrize("strategy", [None, {"type": "None"}], ids=["unset", "none"])
def test_without_recreate_a_template_change_is_refused_by_name(reactor: Reactor, strategy: Any) -> None:
    """Issue 24 item 3: without Recreate KubeRay never carries a template change to a running pod, so the reactor
    writes nothing and says why (in the outcome, `reactor plan` and a Warning Event)."""
    cluster = _cluster(reactor, upgradeStrategy=strategy)
    outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "upgradeStrategy.type Recreate" in outcome["detail"], outcome
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]
    events = [e for e in reactor.sim.list("events", NAMESPACE) if e["involvedObject"]["name"] == "ray"
              and e["reason"] == "OperatorForbids"]
    assert events and events[0]["type"] == "Warning" and "Recreate" in events[0]["message"], events
    # Replicas are not a template change: KubeRay scales a group whatever the strategy.
    assert _post(reactor, "GPUIdle", value=0.0, gpus=4)["result"] == "applied"


def test_with_in_tree_autoscaling_replicas_are_the_autoscalers(reactor: Reactor) -> None:
    _cluster(reactor, enableInTreeAutoscaling=True)
    outcome = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "autoscaler" in outcome["detail"], outcome


def test_below_min_replicas_kuberay_would_clamp_so_nothing_is_written(reactor: Reactor) -> None:
    cluster = _cluster(reactor)
    rc = custom(reactor.sim, "rayclusters", "ray")
    rc["spec"]["workerGroupSpecs"][0]["minReplicas"] = 2
    reactor.sim.apply(rc)
    reconcile_ray(reactor.sim, "ray")
    outcome = _post(reactor, "GPUIdle", value=0.0, gpus=4)
    assert outcome["reason"] == "operator-forbids" and "minReplicas 2" in outcome["detail"], outcome
    assert _groups(reactor)[0]["replicas"] == cluster["spec"]["workerGroupSpecs"][0]["replicas"]


def test_a_group_of_several_hosts_counts_replicas_times_hosts(reactor: Reactor) -> None:
    """GetWorkerGroupDesiredReplicas: replicas × numOfHosts pods; a resize moves the GPUs of every one."""
    _cluster(reactor)
    rc = custom(reactor.sim, "rayclusters", "ray")
    rc["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    reactor.sim.apply(rc)
    reconcile_ray(reactor.sim, "ray")
    assert len(reactor.sim.list("pods", NAMESPACE, label_selector="ray.io/group=gpu-workers")) == 4
    r = reactor.post(notification([AlertSpec("GPUUnderutilized", NAMESPACE, WORKER, "ray-worker", value=0.1,
                                             gpus=4)]))
    (outcome,) = r.get_json()["outcomes"]
    assert outcome["result"] == "applied", outcome
    from reactor.act.metrics import ActMetrics

    assert ActMetrics.of(reactor.service.engine.metrics).gpus_changed.labels(direction="released",
                                                              namespace=NAMESPACE)._value.get() == 12


def test_a_look_alike_pod_of_another_team_is_refused(reactor: Reactor, cluster: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: a pod with the RayCluster's uid and KubeRay's labels, not KubeRay's name."""
    reactor.sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "mine", "namespace": NAMESPACE, "ownerReferences": owner_ref(cluster),
                                    "labels": {"ray.io/cluster": "ray", "ray.io/group": "gpu-workers",
                                               "ray.io/node-type": "worker"}},
                       "spec": {"containers": [container("ray-worker", 4)]}})
    outcome = _post(reactor, "GPUUnderutilized", "mine", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and "utils.PodName" in outcome["detail"], outcome
    assert custom(reactor.sim, "rayclusters", "ray")["spec"] == cluster["spec"]


def test_a_raycluster_a_rayservice_manages_is_left_to_it_without_the_rayservice_adapter(
        sim: SimCluster, token_file: Path) -> None:
    """A RayService owns its RayClusters and writes their spec from its own rayClusterConfig: a change made on the
    RayCluster would be undone, so with the RayService adapter off the pod's owner is the RayService, unsupported.
    (With it on, see test_rayservice.py.)"""
    reactor = build_reactor(sim, make_settings(token_file, **POLICY, adapters={"builtin": ["RayCluster"]}))
    try:
        install(sim, "ray.io_rayservices.yaml")
        _cluster(reactor)
        sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService",
                   "metadata": {"name": "serve", "namespace": NAMESPACE},
                   "spec": {"rayClusterConfig": custom(sim, "rayclusters", "ray")["spec"]}})
        service = custom(sim, "rayservices", "serve")
        rc = custom(sim, "rayclusters", "ray")
        rc["metadata"]["ownerReferences"] = owner_ref(service)
        sim.apply(rc)
        outcome = _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)
        assert (outcome["reason"], outcome["workload"]) == ("unsupported-owner", f"RayService/{NAMESPACE}/serve")
        assert _gpus(_groups(reactor)[0]) == "4"
    finally:
        reactor.service.kube.close()


def test_plan_names_the_refusal_and_records_no_event(reactor: Reactor) -> None:
    """`reactor plan` (the engine in dry run, as tests/adapters/test_plan.py runs it) prints the refusal by name; only
    a real run posts the Warning Event."""
    import dataclasses
    import io
    from contextlib import redirect_stdout

    from reactor.app.assembly import build_engine
    from reactor.intake.alerts import parse_notification
    from reactor.tools.plan import print_plan
    _cluster(reactor, upgradeStrategy=None)
    settings = reactor.service.engine.settings
    dry = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    engine = build_engine(dry, kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, WORKER, "ray-worker", 0.1, 4)])
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(body)), engine.settings)
    assert "operator-forbids" in out.getvalue() and "upgradeStrategy.type Recreate" in out.getvalue(), out.getvalue()
    assert not [e for e in reactor.sim.list("events", NAMESPACE) if e["reason"] == "OperatorForbids"]


def test_two_groups_naming_their_container_alike_keep_their_state_apart(sim: SimCluster, token_file: Path) -> None:
    """Issue 23: the groups of one RayCluster share its annotations, and both groups here call their container
    `ray-worker`. Group A shrinks 4 → 1 (unreverted), then group B grows 2 → 3 and its alert resolves. `original`
    keyed by container name alone held A's 4, so B's revert wrote 4 into B; now the record names the group
    (`part`), `original` keys `<group>/<container>`, and the revert writes back B's own 2, leaving A at 1."""
    moments = iter(datetime.now(UTC) + timedelta(minutes=i) for i in range(1000))
    reactor = build_reactor(sim, make_settings(token_file, **POLICY), clock=lambda: next(moments))
    try:
        install(sim, "ray.io_rayclusters.yaml")
        sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                   "metadata": {"name": "ray", "namespace": NAMESPACE, "annotations": {ALLOW_RECREATE: "true"}},
                   "spec": {"rayVersion": "2.40.0", "upgradeStrategy": {"type": "Recreate"},
                            "headGroupSpec": {"rayStartParams": {},
                                              "template": {"spec": {"containers": [container("ray-head", 0)]}}},
                            "workerGroupSpecs": [ray_group("gpu-workers", 4, 1), ray_group("gpu-workers-b", 2, 1)]}})
        reconcile_ray(sim, "ray")
        assert _post(reactor, "GPUUnderutilized", value=0.1, gpus=4)["result"] == "applied"
        reconcile_ray(sim, "ray")
        grown = _post(reactor, "GPUMemorySaturated", ray_pod_name("ray", "gpu-workers-b", 0), value=0.97, gpus=2)
        assert (grown["result"], grown["from"]) == ("applied", 2), grown
        reconcile_ray(sim, "ray")
        annotations = custom(sim, "rayclusters", "ray")["metadata"]["annotations"]
        assert json.loads(annotations[LAST_ACTION])["part"] == "gpu-workers-b"
        assert json.loads(annotations[ORIGINAL]) == {"gpus": {"gpu-workers/ray-worker": 4,
                                                              "gpu-workers-b/ray-worker": 2}}
        reverted = _post(reactor, "GPUMemorySaturated", ray_pod_name("ray", "gpu-workers-b", 0), value=0.97, gpus=2,
                         status="resolved")
        assert (reverted["result"], reverted.get("to")) == ("applied", 2), reverted
        assert [_gpus(g) for g in _groups(reactor)] == ["1", "2"]
    finally:
        reactor.service.kube.close()
