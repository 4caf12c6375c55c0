"""LeaderWorkerSet v1 over HTTP with the CRD installed (issue 17): multi-host inference groups. A worker pod
reaches the LWS through its group's StatefulSet and its leader pod (a link the LWS controller builds); a GPU
change goes to the template the pod came from, so it applies to every group."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import GPU, LWS, container, custom, install, owner_ref, reconcile_lws, set_status
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

LWS_SPEC = {"replicas": 2, "leaderWorkerTemplate": {
    "size": 2,
    "leaderTemplate": {"spec": {"priorityClassName": "medium-priority-gpu",
                                "containers": [container("vllm-leader", 4)]}},
    "workerTemplate": {"spec": {"priorityClassName": "medium-priority-gpu",
                                "containers": [container("vllm-worker", 4)]}}}}


@pytest.fixture
def lws(reactor: Reactor) -> dict[str, Any]:
    install(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    reactor.sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                       "metadata": {"name": "vllm", "namespace": NAMESPACE},
                       "spec": {"replicas": 2, "leaderWorkerTemplate": {
                           "size": 2,
                           "leaderTemplate": {"spec": {"priorityClassName": "medium-priority-gpu",
                                                       "containers": [container("vllm-leader", 4)]}},
                           "workerTemplate": {"spec": {"priorityClassName": "medium-priority-gpu",
                                                       "containers": [container("vllm-worker", 4)]}}}}})
    reconcile_lws(reactor.sim, "vllm")
    return custom(reactor.sim, "leaderworkersets", "vllm")


def _post(reactor: Reactor, name: str, pod: str, container_name: str, **kw: Any) -> dict[str, Any]:
    r = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, container_name, **kw)]))
    (outcome,) = r.get_json()["outcomes"]
    return outcome


def _template(reactor: Reactor, which: str) -> dict[str, Any]:
    return custom(reactor.sim, "leaderworkersets", "vllm")["spec"]["leaderWorkerTemplate"][which]["spec"]


def test_a_worker_pod_shrinks_the_worker_template_through_its_leader(reactor: Reactor, lws: dict[str, Any]) -> None:
    group = "leaderworkerset.sigs.k8s.io/group-index=1,leaderworkerset.sigs.k8s.io/worker-index!=0"
    assert [p["metadata"]["name"] for p in reactor.sim.list("pods", NAMESPACE, label_selector=group)] == ["vllm-1-1"]
    outcome = _post(reactor, "GPUUnderutilized", "vllm-1-1", "vllm-worker", value=0.1, gpus=4)
    assert (outcome["result"], outcome["workload"]) == ("applied", f"LeaderWorkerSet/{NAMESPACE}/vllm"), outcome
    assert _template(reactor, "workerTemplate")["containers"][0]["resources"]["limits"][GPU] == "1"
    assert _template(reactor, "leaderTemplate")["containers"][0]["resources"]["limits"][GPU] == "4"
    assert reactor.sim.requests[("patch", "statefulsets", "")] == 0


def test_a_leader_pod_changes_the_leader_template(reactor: Reactor, lws: dict[str, Any]) -> None:
    outcome = _post(reactor, "GPUSaturated", "vllm-0", "vllm-leader", value=0.99, gpus=4)
    assert outcome["result"] == "applied", outcome
    assert _template(reactor, "leaderTemplate")["priorityClassName"] == "high-priority-gpu"
    assert _template(reactor, "workerTemplate")["priorityClassName"] == "medium-priority-gpu"


def test_idle_groups_scale_down(reactor: Reactor, lws: dict[str, Any]) -> None:
    assert _post(reactor, "GPUIdle", "vllm-0-1", "vllm-worker", value=0.0, gpus=4)["result"] == "applied"
    assert custom(reactor.sim, "leaderworkersets", "vllm")["spec"]["replicas"] == 1


def test_a_grow_of_the_group_reverts(reactor: Reactor, lws: dict[str, Any]) -> None:
    assert _post(reactor, "GPUMemorySaturated", "vllm-0-1", "vllm-worker", value=0.97, gpus=4)["result"] == "applied"
    grown = _template(reactor, "workerTemplate")["containers"][0]["resources"]["limits"][GPU]
    assert int(grown) > 4
    outcome = _post(reactor, "GPUMemorySaturated", "vllm-0-1", "vllm-worker", value=0.97, gpus=4, status="resolved")
    assert (outcome["result"], outcome.get("action")) == ("applied", "revert"), outcome
    assert _template(reactor, "workerTemplate")["containers"][0]["resources"]["limits"][GPU] == "4"


def test_an_update_in_progress_refuses(reactor: Reactor, lws: dict[str, Any]) -> None:
    set_status(reactor.sim, "leaderworkersets", "vllm",
               {"conditions": [{"type": "UpdateInProgress", "status": "True", "reason": "GroupsUpdating"}]})
    outcome = _post(reactor, "GPUUnderutilized", "vllm-1-1", "vllm-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "rollout-in-progress" and "GroupsUpdating" in outcome["detail"], outcome


def test_a_worker_statefulset_under_another_sets_leader_is_not_believed(reactor: Reactor,
                                                                        lws: dict[str, Any]) -> None:
    """A tenant's StatefulSet claiming a leader pod of `vllm` while labelled for another LWS: owner-unverified."""
    leader = reactor.sim.get("pods", NAMESPACE, "vllm-0")
    labels = {"role": "forged"}
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": "forged", "namespace": NAMESPACE, "labels": {LWS: "other"},
                                    "ownerReferences": owner_ref(leader)},
                       "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": labels},
                                "template": {"metadata": {"labels": labels},
                                             "spec": {"containers": [container("vllm-worker", 4)]}}}})
    reactor.sim.settle()
    outcome = _post(reactor, "GPUUnderutilized", "forged-0", "vllm-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified", outcome
    assert _template(reactor, "workerTemplate")["containers"][0]["resources"]["limits"][GPU] == "4"


def test_a_look_alike_worker_statefulset_not_named_after_its_leader_is_refused(reactor: Reactor,
                                                                            lws: dict[str, Any]) -> None:
    """Issue 24 item 8, as a tenant: the leader pod's uid and every LWS label copied, not the name the LWS controller
    gives a group's workers (its leader pod's, constructWorkerStatefulSetApplyConfiguration)."""
    leader = reactor.sim.get("pods", NAMESPACE, "vllm-1")
    labels = {k: v for k, v in leader["metadata"]["labels"].items() if k.startswith("leaderworkerset")}
    labels.pop("leaderworkerset.sigs.k8s.io/worker-index")
    reactor.sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": "mine", "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": owner_ref(leader)},
                       "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"app": "mine"}},
                                "template": {"metadata": {"labels": {**labels, "app": "mine"}},
                                             "spec": {"containers": [container("vllm-worker", 4)]}}}})
    reactor.sim.settle()
    outcome = _post(reactor, "GPUUnderutilized", "mine-0", "vllm-worker", value=0.1, gpus=4)
    assert outcome["reason"] == "owner-unverified" and "after its leader pod vllm-1" in outcome["detail"], outcome
    assert custom(reactor.sim, "leaderworkersets", "vllm")["spec"] == lws["spec"]


def test_a_replica_is_a_group_of_size_pods_for_quota(reactor: Reactor) -> None:
    """Issue 24 item 5: 2 groups of 3 (a leader, 2 workers of 4 GPUs): a worker resize 4 → 5 touches 2 × 2 pods and
    needs 4 GPUs of quota (counting one pod per replica it would have asked 2, and the pods would sit Pending)."""
    install(reactor.sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    spec = {**LWS_SPEC, "leaderWorkerTemplate": {**LWS_SPEC["leaderWorkerTemplate"], "size": 3}}
    reactor.sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                       "metadata": {"name": "vllm", "namespace": NAMESPACE}, "spec": spec})
    reconcile_lws(reactor.sim, "vllm")
    assert len(reactor.sim.list("pods", NAMESPACE, label_selector=f"{LWS}=vllm")) == 6
    for headroom, result in ((3, "quota-exceeded"), (4, "applied")):
        quota = reactor.sim.get("resourcequotas", NAMESPACE, "gpu-quota")
        quota["spec"]["hard"][f"requests.{GPU}"] = str(int(quota["status"]["used"][f"requests.{GPU}"]) + headroom)
        reactor.sim.apply(quota)
        reactor.sim.settle()
        outcome = _post(reactor, "GPUMemorySaturated", "vllm-0-1", "vllm-worker", value=0.97, gpus=4)
        assert result in (outcome["result"], outcome.get("reason")), outcome
        assert result == "applied" or "needs 4 GPUs" in outcome["detail"], outcome
    assert _template(reactor, "workerTemplate")["containers"][0]["resources"]["limits"][GPU] == "5"


def test_leader_and_worker_naming_their_container_alike_keep_their_state_apart(sim: SimCluster,
                                                                               token_file: Path) -> None:
    """Issue 23: the leader and worker templates share the LWS's annotations and both call their container `vllm`.
    The workers shrink 2 → 1 (unreverted), then the leader grows 4 → more and its alert resolves: the revert writes
    back the leader's own 4 (it used to find `original.gpus.vllm` = 2, the workers' value), workers stay at 1."""
    moments = iter(datetime.now(UTC) + timedelta(minutes=i) for i in range(1000))
    reactor = build_reactor(sim, make_settings(token_file, **POLICY), clock=lambda: next(moments))
    try:
        install(sim, "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
        sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                   "metadata": {"name": "vllm", "namespace": NAMESPACE},
                   "spec": {"replicas": 1, "leaderWorkerTemplate": {
                       "size": 2,
                       "leaderTemplate": {"spec": {"containers": [container("vllm", 4)]}},
                       "workerTemplate": {"spec": {"containers": [container("vllm", 2)]}}}}})
        reconcile_lws(sim, "vllm")
        # The group's first worker: its StatefulSet counts from ordinal 1
        # (constructWorkerStatefulSetApplyConfiguration).
        shrunk = _post(reactor, "GPUUnderutilized", "vllm-0-1", "vllm", value=0.1, gpus=2)
        assert (shrunk["result"], shrunk.get("to")) == ("applied", 1), shrunk
        reconcile_lws(sim, "vllm")
        grown = _post(reactor, "GPUMemorySaturated", "vllm-0", "vllm", value=0.97, gpus=4)
        assert (grown["result"], grown.get("from")) == ("applied", 4), grown
        reconcile_lws(sim, "vllm")
        reverted = _post(reactor, "GPUMemorySaturated", "vllm-0", "vllm", value=0.97, gpus=4, status="resolved")
        assert (reverted["result"], reverted.get("to")) == ("applied", 4), reverted

        def gpus(which: str) -> str:
            return str(_template(reactor, which)["containers"][0]["resources"]["limits"][GPU])
        assert (gpus("leaderTemplate"), gpus("workerTemplate")) == ("4", "1")
    finally:
        reactor.service.kube.close()
