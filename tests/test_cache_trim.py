"""The transform every object passes before the watch cache keeps it (reactor/cluster/trim.py), and the store's
namespace index: what the reactor reads survives, what it never reads does not, and a read is the reader's own."""

from __future__ import annotations

from typing import Any

from reactor.cluster.cache import ALL, Store
from reactor.cluster.informer import CACHED
from reactor.cluster.trim import LAST_APPLIED, trimmed
from reactor.core.ownership import ControllerRef, link_failure

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}]


def replica_set(name: str = "web-7d9f", namespace: str = "team-a") -> dict[str, Any]:
    """As the Deployment controller builds one (k8s.io/kubernetes pkg/controller/deployment/sync.go
    `getNewReplicaSet`): the Deployment's template and selector plus the pod-template-hash label."""
    labels = {"app": "web", "pod-template-hash": "7d9f"}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "uid": "rs-uid", "resourceVersion": "12",
                         "generation": 1, "labels": dict(labels),
                         "annotations": {"deployment.kubernetes.io/revision": "1", LAST_APPLIED: "{...}"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": "d-uid", "controller": True, "blockOwnerDeletion": True}],
                         "managedFields": MANAGED},
            "spec": {"replicas": 2, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"containers": [{"name": "server", "image": "x",
                                                           "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
            "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}}


def test_a_replica_set_keeps_its_ownership_fields_only() -> None:
    kept = trimmed("ReplicaSet", replica_set())
    assert "managedFields" not in kept["metadata"] and LAST_APPLIED not in kept["metadata"]["annotations"]
    assert kept["metadata"]["ownerReferences"][0]["uid"] == "d-uid"
    assert kept["spec"]["selector"] == {"matchLabels": {"app": "web", "pod-template-hash": "7d9f"}}
    assert kept["spec"]["template"] == {"metadata": {"labels": {"app": "web", "pod-template-hash": "7d9f"}}}
    assert "status" not in kept


def test_the_ownership_checks_judge_a_trimmed_replica_set_as_the_whole_one() -> None:
    deployment = {"metadata": {"uid": "d-uid"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    pod = {"metadata": {"labels": {"app": "web", "pod-template-hash": "7d9f"}}}
    stranger = {"metadata": {"labels": {"app": "other"}}}
    whole, kept = replica_set(), trimmed("ReplicaSet", replica_set())
    to_rs = ControllerRef("ReplicaSet", "web-7d9f", "rs-uid")
    to_d = ControllerRef("Deployment", "web", "d-uid")
    for child, rs_ref in ((pod, to_rs), (stranger, to_rs)):
        assert link_failure("Pod", child, rs_ref, kept) == link_failure("Pod", child, rs_ref, whole)
    assert link_failure("Pod", stranger, to_rs, kept) is not None
    assert link_failure("ReplicaSet", kept, to_d, deployment) is None
    moved = replica_set()
    moved["spec"]["template"]["metadata"]["labels"] = {"app": "elsewhere"}
    assert link_failure("ReplicaSet", trimmed("ReplicaSet", moved), to_d, deployment) is not None


def test_a_workload_keeps_its_template_and_status() -> None:
    d = replica_set()
    d["kind"] = "Deployment"
    kept = trimmed("Deployment", d)
    assert kept["spec"] == d["spec"] and kept["status"] == d["status"]
    assert "managedFields" not in kept["metadata"] and "managedFields" in d["metadata"], "the argument is unchanged"


def test_a_job_keeps_its_status_but_not_its_pod_spec() -> None:
    job = replica_set()
    job["kind"] = "Job"
    kept = trimmed("Job", job)
    assert kept["status"] == job["status"] and "spec" not in kept["spec"]["template"]


def test_the_store_reads_one_namespace_without_the_others() -> None:
    store = Store(CACHED)
    store.replace("ReplicaSet", ALL, [replica_set("a", "team-a"), replica_set("b", "team-b"),
                                      replica_set("c", "team-a")])
    names = sorted(o["metadata"]["name"] for o in store.objects("ReplicaSet", "team-a"))  # type: ignore[union-attr]
    assert names == ["a", "c"]
    store.apply("ReplicaSet", "DELETED", replica_set("b", "team-b"))
    assert store.objects("ReplicaSet", "team-b") == [] and store.count() == 2
    store.replace("ReplicaSet", "team-a", [replica_set("d", "team-a")])
    assert [o["metadata"]["name"] for o in store.objects("ReplicaSet", "team-a")] == ["d"]  # type: ignore[union-attr]


def test_each_read_is_the_readers_own_copy() -> None:
    store = Store(CACHED)
    store.replace("ReplicaSet", ALL, [replica_set()])
    first = store.lookup("ReplicaSet", "team-a", "web-7d9f")
    assert isinstance(first, dict)
    first["metadata"]["labels"]["app"] = "changed"
    again = store.lookup("ReplicaSet", "team-a", "web-7d9f")
    assert isinstance(again, dict) and again["metadata"]["labels"]["app"] == "web"
