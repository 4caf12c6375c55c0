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


def _page(items: list[Any], **meta: str) -> bytes:
    """A list answer as the API server writes it (encoding/json of a List: compact, no HTML escaping)."""
    import json

    return json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items},
                      separators=(",", ":"), ensure_ascii=False).encode()


def _pages_by_kind() -> dict[str, list[dict[str, Any]]]:
    import yaml

    from tests.support import HERE

    docs = [d for d in yaml.safe_load_all((HERE / "fixtures" / "cluster.yaml").read_text()) if d]
    by: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CACHED}
    for doc in docs:
        if doc.get("kind") in by:
            by[doc["kind"]].append(doc)
    by["ReplicaSet"] += [replica_set(), replica_set("no-annotations"), replica_set("é-unicode")]
    del by["ReplicaSet"][-2]["metadata"]["annotations"]
    by["Job"].append({**replica_set("job"), "kind": "Job", "status": {"succeeded": 1}})
    by["Deployment"].append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "applied", "namespace": "t", "managedFields": MANAGED,
        "annotations": {LAST_APPLIED: '{"kind":"Deployment"}', "keep": "me"}}, "spec": {"replicas": 1},
        "status": {"replicas": 1}, "extra": {"kept": True}})
    by["PriorityClass"].append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 10,
                                "metadata": {"name": "cluster-wide"}})
    return by


def test_a_page_trimmed_as_it_is_decoded_keeps_exactly_what_trimmed_keeps() -> None:
    """decode_page (msgspec, spans of the page's bytes) and trimmed (dicts) must keep the same objects: the store
    holds one, the reactor's readers were written against the other."""
    import json

    from reactor.cluster.trim import Encoded, decode_page

    for kind, objects in _pages_by_kind().items():
        page = decode_page(kind, _page(objects, resourceVersion="42", **{"continue": "next"}))
        assert page["metadata"] == {"resourceVersion": "42", "continue": "next"}
        assert all(isinstance(e, Encoded) for e in page["items"])
        assert [json.loads(e.text) for e in page["items"]] == [trimmed(kind, o) for o in objects], kind
        assert [(e.namespace, e.name) for e in page["items"]] == [
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]


def test_a_page_written_with_spaces_is_kept_compact() -> None:
    """Python's json writes `", "` and `": "` (the embedded API server); Go's encoding/json writes neither: the cache
    holds the same bytes either way."""
    import json

    from reactor.cluster.trim import decode_page

    spaced = json.dumps({"metadata": {"resourceVersion": "1"}, "items": [replica_set()]}).encode()
    assert b", " in spaced
    [item] = decode_page("ReplicaSet", spaced)["items"]
    assert item.text == json.dumps(trimmed("ReplicaSet", replica_set()), separators=(",", ":")).encode()


def test_a_page_msgspec_cannot_read_so_is_decoded_the_ordinary_way() -> None:
    import json

    from reactor.cluster.trim import decode_page

    odd = {"metadata": {"name": 7, "namespace": "ns"}, "spec": {}}  # a name that is not a string
    page = decode_page("Deployment", _page([odd], resourceVersion="1"))
    assert [(e.namespace, e.name, json.loads(e.text)) for e in page["items"]] == [("ns", "7", odd)]
    assert decode_page("Deployment", b'{"metadata":{"resourceVersion":"3"},"items":null}') == {
        "metadata": {"resourceVersion": "3", "continue": ""}, "items": []}


def test_the_store_keeps_an_encoded_page_as_it_comes() -> None:
    from reactor.cluster.trim import decode_page

    store = Store(CACHED)
    store.replace("ReplicaSet", "team-a", decode_page("ReplicaSet", _page([replica_set()]))["items"])
    assert store.lookup("ReplicaSet", "team-a", "web-7d9f") == trimmed("ReplicaSet", replica_set())
