"""Controllers driven by settle(): Deployment -> ReplicaSet -> Pods, StatefulSet, scheduling, scale."""

from __future__ import annotations

import re

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, deployment, statefulset
from tests.sim.helpers import status_of


def _gpu_template_patch(gpus: int) -> dict:  # type: ignore[type-arg]
    return {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}]}}}}


def test_deployment_creates_hashed_replicaset_and_owned_pods(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """Deployment -> ReplicaSet `<deploy>-<pod-template-hash>` -> Pods `<rs>-<5 chars>`, controller ownerRefs."""
    apps.create_namespaced_deployment("ml", deployment(replicas=2))
    sim.settle()
    (rs,) = sim.list("replicasets", "ml")
    hash_ = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{hash_}"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["metadata"]["ownerReferences"][0]["controller"] is True
    pods = sim.list("pods", "ml")
    assert len(pods) == 2
    for p in pods:
        assert re.fullmatch(rf"web-{hash_}-[a-z0-9]{{5}}", p["metadata"]["name"])
        assert p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert p["status"]["phase"] == "Running"
    status = apps.read_namespaced_deployment("web", "ml").status
    assert (status.replicas, status.ready_replicas, status.available_replicas, status.updated_replicas) == (2, 2, 2, 2)
    assert status.observed_generation == 1
    assert {c.type: c.status for c in status.conditions} == {"Available": "True", "Progressing": "True"}


def test_pod_names_are_deterministic_per_cluster() -> None:
    """Two clusters fed the same operations name their pods the same (seeded generator)."""
    names = []
    for _ in range(2):
        sim = SimCluster()
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        sim.apply(deployment(replicas=3))
        sim.settle()
        names.append([p["metadata"]["name"] for p in sim.list("pods", "ml")])
    assert names[0] == names[1]


def test_template_change_rolls_to_a_new_replicaset(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """A template patch creates a new RS; after settle all pods run the new template, the old RS is at 0."""
    apps.create_namespaced_deployment("ml", deployment(replicas=3))
    sim.settle()
    apps.patch_namespaced_deployment("web", "ml", _gpu_template_patch(2))
    sim.settle()
    rss = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in sim.list("replicasets", "ml")}
    assert sorted(rss.values()) == [0, 3]
    pods = sim.list("pods", "ml")
    assert len(pods) == 3
    assert all(p["spec"]["containers"][0]["resources"]["limits"][GPU] == "2" for p in pods)
    status = apps.read_namespaced_deployment("web", "ml").status
    assert status.observed_generation == 2 and status.updated_replicas == 3


def test_rollout_honours_max_surge_rounded_up(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """maxSurge 25% of 2 rounds up to 1 and maxUnavailable 25% of 2 down to 0: one controller round adds
    exactly one new pod and removes none."""
    apps.create_namespaced_deployment("ml", deployment(replicas=2))
    sim.settle()
    apps.patch_namespaced_deployment("web", "ml", _gpu_template_patch(2))
    sim.controllers.run_once()
    rss = sorted(rs["spec"]["replicas"] for rs in sim.list("replicasets", "ml"))
    assert rss == [1, 2]


def test_rollout_beyond_quota_fails_create_and_keeps_old_pods(sim: SimCluster, apps: k8s.AppsV1Api,
                                                              core: k8s.CoreV1Api) -> None:
    """A Deployment patched beyond its quota: the patch succeeds, the new RS's pods are denied, the RS gets a
    `FailedCreate` Warning Event (`Error creating: pods "..." is forbidden: exceeded quota: ...`), the
    Deployment a `ReplicaFailure` condition, and the old pods keep running."""
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
               "spec": {"hard": {"requests.nvidia.com/gpu": "3"}}})
    apps.create_namespaced_deployment("ml", deployment(replicas=2))
    sim.settle()
    old = {p["metadata"]["name"] for p in sim.list("pods", "ml")}
    apps.patch_namespaced_deployment("web", "ml", _gpu_template_patch(2))
    sim.settle()
    assert {p["metadata"]["name"] for p in sim.list("pods", "ml") if p["status"]["phase"] == "Running"} == old
    conds = {c.type: c for c in apps.read_namespaced_deployment("web", "ml").status.conditions}
    assert conds["ReplicaFailure"].status == "True" and conds["ReplicaFailure"].reason == "FailedCreate"
    assert "exceeded quota: q" in conds["ReplicaFailure"].message
    new_rs = next(rs for rs in sim.list("replicasets", "ml") if rs["spec"]["replicas"] == 1)
    events = core.list_namespaced_event(
        "ml", field_selector=f"involvedObject.name={new_rs['metadata']['name']},involvedObject.kind=ReplicaSet")
    (event,) = events.items
    assert event.reason == "FailedCreate" and event.type == "Warning"
    assert re.fullmatch(r'Error creating: pods "web-\w+-\w{5}" is forbidden: exceeded quota: q, requested: '
                        r"requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=2, "
                        r"limited: requests.nvidia.com/gpu=3", event.message)


def test_statefulset_pods_by_ordinal_and_rolling_update(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """StatefulSet -> pods `<sts>-0..N-1` owned by it; a template change replaces them and
    currentRevision catches up with updateRevision."""
    apps.create_namespaced_stateful_set("ml", statefulset(replicas=2))
    sim.settle()
    pods = sim.list("pods", "ml")
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1"]
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet" for p in pods)
    first = apps.read_namespaced_stateful_set("db", "ml").status
    apps.patch_namespaced_stateful_set("db", "ml", _gpu_template_patch(2))
    sim.settle()
    status = apps.read_namespaced_stateful_set("db", "ml").status
    assert status.update_revision != first.update_revision
    assert status.current_revision == status.update_revision
    assert (status.observed_generation, status.updated_replicas, status.ready_replicas) == (2, 2, 2)
    assert all(p["spec"]["containers"][0]["resources"]["limits"][GPU] == "2" for p in sim.list("pods", "ml"))


def test_statefulset_ordinals_start_shifts_the_pod_names(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """spec.ordinals.start (kubernetes pkg/controller/statefulset stateful_set_utils.go getStartOrdinal /
    getEndOrdinal): pods `<sts>-start..start+N-1`; scaling down removes the highest, Parallel creates them at once
    and a template change still replaces each (a LeaderWorkerSet's worker StatefulSets start at 1)."""
    body = statefulset(replicas=2)
    body["spec"].update({"ordinals": {"start": 1}, "podManagementPolicy": "Parallel"})
    apps.create_namespaced_stateful_set("ml", body)
    sim.settle()
    assert sorted(p["metadata"]["name"] for p in sim.list("pods", "ml")) == ["db-1", "db-2"]
    apps.patch_namespaced_stateful_set("db", "ml", _gpu_template_patch(2))
    sim.settle()
    assert all(p["spec"]["containers"][0]["resources"]["limits"][GPU] == "2" for p in sim.list("pods", "ml"))
    apps.patch_namespaced_stateful_set("db", "ml", {"spec": {"replicas": 1}})
    sim.settle()
    assert [p["metadata"]["name"] for p in sim.list("pods", "ml")] == ["db-1"]


def test_statefulset_update_replaces_highest_ordinal_first(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """RollingUpdate deletes the highest ordinal not at the update revision first."""
    apps.create_namespaced_stateful_set("ml", statefulset(replicas=3))
    sim.settle()
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.list("pods", "ml")}
    apps.patch_namespaced_stateful_set("db", "ml", _gpu_template_patch(2))
    sim.controllers.run_once()
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.list("pods", "ml")}
    assert now["db-0"] == uids["db-0"] and now["db-1"] == uids["db-1"] and "db-2" not in now


def test_scale_subresource_reads_and_writes_replicas(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """GET/PATCH/PUT autoscaling/v1 Scale on deployments and statefulsets."""
    apps.create_namespaced_deployment("ml", deployment(replicas=1))
    apps.create_namespaced_stateful_set("ml", statefulset(replicas=1))
    sim.settle()
    scale = apps.read_namespaced_deployment_scale("web", "ml")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (1, 1, "app=web")
    apps.patch_namespaced_deployment_scale("web", "ml", {"spec": {"replicas": 3}})
    apps.replace_namespaced_stateful_set_scale("db", "ml", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                            "metadata": {"name": "db"}, "spec": {"replicas": 2}})
    sim.settle()
    assert apps.read_namespaced_deployment("web", "ml").status.ready_replicas == 3
    assert apps.read_namespaced_stateful_set("db", "ml").status.ready_replicas == 2


def test_deleting_a_deployment_removes_its_replicasets_and_pods(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """Background garbage collection removes dependents via ownerReferences."""
    apps.create_namespaced_deployment("ml", deployment(replicas=2))
    sim.settle()
    apps.delete_namespaced_deployment("web", "ml")
    sim.settle()
    assert sim.list("replicasets", "ml") == [] and sim.list("pods", "ml") == []


def test_scale_to_missing_object_is_404(apps: k8s.AppsV1Api) -> None:
    """The scale subresource of a missing Deployment: 404 `deployments.apps "x" not found`."""
    body = status_of(lambda: apps.read_namespaced_deployment_scale("x", "ml"), 404)
    assert body["message"] == 'deployments.apps "x" not found'
