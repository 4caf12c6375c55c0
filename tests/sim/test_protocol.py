"""The REST protocol of kube-apiserver as the official client sees it over real HTTP."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from reactor_sim import SimCluster
from tests.sim.builders import GPU, container, deployment, pod
from tests.sim.helpers import status_of


def test_create_returns_object_with_uid_resource_version_and_generation(apps: k8s.AppsV1Api) -> None:
    """POST stores the object: metadata.uid, string resourceVersion, creationTimestamp, generation 1."""
    created = apps.create_namespaced_deployment("ml", deployment())
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.resource_version.isdigit()
    assert created.metadata.generation == 1
    assert created.spec.strategy.rolling_update.max_surge == "25%"


def test_get_missing_object_is_404_not_found_with_plural_details(apps: k8s.AppsV1Api) -> None:
    """GET of a missing object: 404 NotFound, `deployments.apps "x" not found`, details.kind=deployments."""
    body = status_of(lambda: apps.read_namespaced_deployment("x", "ml"), 404)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'deployments.apps "x" not found'
    assert body["details"] == {"name": "x", "group": "apps", "kind": "deployments"}


def test_core_not_found_message_has_no_group(core: k8s.CoreV1Api) -> None:
    """Core resources are named without a group: `pods "p" not found`, details without group."""
    body = status_of(lambda: core.read_namespaced_pod("p", "ml"), 404)
    assert body["message"] == 'pods "p" not found'
    assert body["details"] == {"name": "p", "kind": "pods"}


def test_create_existing_is_409_already_exists(apps: k8s.AppsV1Api) -> None:
    """POST of an existing name: 409 AlreadyExists, `deployments.apps "web" already exists`."""
    apps.create_namespaced_deployment("ml", deployment())
    body = status_of(lambda: apps.create_namespaced_deployment("ml", deployment()), 409)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'deployments.apps "web" already exists'


def test_create_into_missing_namespace_is_404_namespace_not_found(apps: k8s.AppsV1Api) -> None:
    """Creating a namespaced object in a missing namespace: 404 `namespaces "nope" not found`."""
    body = status_of(lambda: apps.create_namespaced_deployment("nope", deployment(ns="nope")), 404)
    assert body["message"] == 'namespaces "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "namespaces"}


def test_generate_name_gets_a_five_character_suffix(core: k8s.CoreV1Api) -> None:
    """metadata.generateName: the server appends 5 random characters."""
    body = pod(name="")
    body["metadata"] = {"generateName": "job-", "namespace": "ml"}
    created = core.create_namespaced_pod("ml", body)
    assert created.metadata.name.startswith("job-") and len(created.metadata.name) == 9


def test_resource_version_is_global_and_monotonic(apps: k8s.AppsV1Api, core: k8s.CoreV1Api) -> None:
    """resourceVersion increases across all resources with every write."""
    a = int(apps.create_namespaced_deployment("ml", deployment("a")).metadata.resource_version)
    b = int(core.create_namespaced_pod("ml", pod()).metadata.resource_version)
    c = int(apps.patch_namespaced_deployment("a", "ml", {"metadata": {"labels": {"x": "1"}}}).metadata.resource_version)
    assert a < b < c


def test_stale_resource_version_in_patch_is_409_conflict_and_nothing_applied(apps: k8s.AppsV1Api) -> None:
    """A patch carrying an old metadata.resourceVersion: 409 Conflict with upstream's message; no change."""
    old = apps.create_namespaced_deployment("ml", deployment())
    apps.patch_namespaced_deployment("web", "ml", {"metadata": {"labels": {"a": "1"}}})
    stale = {"metadata": {"resourceVersion": old.metadata.resource_version, "labels": {"b": "2"}}}
    body = status_of(lambda: apps.patch_namespaced_deployment("web", "ml", stale), 409)
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on deployments.apps "web": the object has been '
                               "modified; please apply your changes to the latest version and try again")
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    assert "b" not in apps.read_namespaced_deployment("web", "ml").metadata.labels


def test_stale_resource_version_in_merge_patch_is_409_too(apps: k8s.AppsV1Api) -> None:
    """JSON merge patch honours metadata.resourceVersion the same way (409 Conflict)."""
    old = apps.create_namespaced_deployment("ml", deployment())
    apps.patch_namespaced_deployment("web", "ml", {"metadata": {"labels": {"a": "1"}}})
    stale = {"metadata": {"resourceVersion": old.metadata.resource_version}}
    status_of(lambda: apps.patch_namespaced_deployment("web", "ml", stale,
                                                       _content_type="application/merge-patch+json"), 409)


def test_current_resource_version_in_patch_is_applied(apps: k8s.AppsV1Api) -> None:
    """A patch with the current resourceVersion succeeds and moves it forward."""
    old = apps.create_namespaced_deployment("ml", deployment())
    new = apps.patch_namespaced_deployment(
        "web", "ml", {"metadata": {"resourceVersion": old.metadata.resource_version, "labels": {"a": "1"}}})
    assert new.metadata.labels == {"a": "1"}
    assert int(new.metadata.resource_version) > int(old.metadata.resource_version)


def test_update_with_stale_resource_version_is_409(apps: k8s.AppsV1Api) -> None:
    """PUT with a stale resourceVersion: 409 Conflict."""
    old = apps.create_namespaced_deployment("ml", deployment())
    apps.patch_namespaced_deployment("web", "ml", {"metadata": {"labels": {"a": "1"}}})
    status_of(lambda: apps.replace_namespaced_deployment("web", "ml", old), 409)


def test_dict_body_is_sent_as_strategic_merge_patch_merging_containers_by_name(apps: k8s.AppsV1Api) -> None:
    """The client sends a dict as strategic-merge-patch+json: containers merge by `name`, others stay."""
    apps.create_namespaced_deployment("ml", deployment(containers=[container("main"), container("side", None)]))
    patched = apps.patch_namespaced_deployment(
        "web", "ml", {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "resources": {"limits": {GPU: "2"}, "requests": {GPU: "2"}}}]}}}})
    cs = patched.spec.template.spec.containers
    assert [c.name for c in cs] == ["main", "side"]
    assert cs[0].resources.limits[GPU] == "2" and cs[0].image == "img:1"


def test_strategic_merge_delete_directive_removes_a_container(apps: k8s.AppsV1Api) -> None:
    """`$patch: delete` in a strategic merge list item removes that item."""
    apps.create_namespaced_deployment("ml", deployment(containers=[container("main"), container("side", None)]))
    patched = apps.patch_namespaced_deployment(
        "web", "ml", {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}})
    assert [c.name for c in patched.spec.template.spec.containers] == ["main"]


def test_merge_patch_replaces_lists_whole(apps: k8s.AppsV1Api) -> None:
    """RFC 7386 merge patch: the containers list is replaced, dropping the containers not named."""
    apps.create_namespaced_deployment("ml", deployment(containers=[container("main"), container("side", None)]))
    patched = apps.patch_namespaced_deployment(
        "web", "ml", {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "x"}]}}}},
        _content_type="application/merge-patch+json")
    assert [c.name for c in patched.spec.template.spec.containers] == ["side"]


def test_json_patch_applies_operations(apps: k8s.AppsV1Api) -> None:
    """A list body is sent as RFC 6902 JSON patch; `test` then `replace` on the replica count."""
    apps.create_namespaced_deployment("ml", deployment())
    patched = apps.patch_namespaced_deployment("web", "ml", [
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 3}])
    assert patched.spec.replicas == 3


def test_failed_json_patch_test_is_422_invalid_with_generic_message(apps: k8s.AppsV1Api) -> None:
    """A failed `test` op: 422 Invalid, generic message, empty details, and nothing applied."""
    apps.create_namespaced_deployment("ml", deployment())
    body = status_of(lambda: apps.patch_namespaced_deployment("web", "ml", [
        {"op": "test", "path": "/spec/replicas", "value": 5},
        {"op": "replace", "path": "/spec/replicas", "value": 3}]), 422)
    assert body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert "details" not in body or body["details"] == {}
    assert apps.read_namespaced_deployment("web", "ml").spec.replicas == 1


def test_generation_bumps_on_spec_change_only(apps: k8s.AppsV1Api) -> None:
    """metadata.generation moves when the spec changes, not for labels or annotations."""
    apps.create_namespaced_deployment("ml", deployment())
    labelled = apps.patch_namespaced_deployment("web", "ml", {"metadata": {"annotations": {"a": "b"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}})
    assert scaled.metadata.generation == 2


def test_list_is_typed_list_with_resource_version(apps: k8s.AppsV1Api, sim: SimCluster) -> None:
    """LIST answers `DeploymentList` with metadata.resourceVersion; across namespaces too."""
    apps.create_namespaced_deployment("ml", deployment("a"))
    apps.create_namespaced_deployment("default", deployment("b", ns="default"))
    raw = json.loads(urllib.request.urlopen(f"{sim.url}/apis/apps/v1/deployments").read())
    assert raw["kind"] == "DeploymentList" and raw["apiVersion"] == "apps/v1"
    assert raw["metadata"]["resourceVersion"].isdigit()
    assert [d["metadata"]["name"] for d in raw["items"]] == ["b", "a"]
    assert [d.metadata.name for d in apps.list_namespaced_deployment("ml").items] == ["a"]


@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=gpu", ["a", "b"]),
    ("tier==gpu,team=x", ["a"]),
    ("tier!=gpu", ["c", "d"]),
    ("team in (x,y)", ["a", "b", "c"]),
    ("team notin (x)", ["b", "c", "d"]),
    ("team", ["a", "b", "c"]),
    ("!team", ["d"]),
], ids=["equal", "double-equal-and", "not-equal", "in", "notin", "exists", "does-not-exist"])
def test_list_label_selector(core: k8s.CoreV1Api, selector: str, expected: list[str]) -> None:
    """labelSelector: equality, inequality, set-based in/notin, exists and !exists."""
    labels = {"a": {"tier": "gpu", "team": "x"}, "b": {"tier": "gpu", "team": "y"},
              "c": {"tier": "cpu", "team": "y"}, "d": {}}
    for name, lab in labels.items():
        body = pod(name)
        body["metadata"]["labels"] = lab
        core.create_namespaced_pod("ml", body)
    got = core.list_namespaced_pod("ml", label_selector=selector).items
    assert [p.metadata.name for p in got] == expected


def test_list_field_selector_metadata_name(core: k8s.CoreV1Api) -> None:
    """fieldSelector metadata.name=... and metadata.namespace=... select by name and namespace."""
    core.create_namespaced_pod("ml", pod("a"))
    core.create_namespaced_pod("ml", pod("b"))
    core.create_namespaced_pod("default", pod("a", ns="default"))
    assert [p.metadata.name for p in core.list_namespaced_pod("ml", field_selector="metadata.name=b").items] == ["b"]
    got = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=default").items
    assert [(p.metadata.namespace, p.metadata.name) for p in got] == [("default", "a")]


def test_unsupported_field_selector_is_400(core: k8s.CoreV1Api) -> None:
    """A field label the resource does not support: 400 BadRequest `field label not supported: X`."""
    body = status_of(lambda: core.list_namespaced_pod("ml", field_selector="spec.bogus=1"), 400)
    assert body["reason"] == "BadRequest"
    assert body["message"] == "field label not supported: spec.bogus"


def test_delete_returns_success_status_and_removes(apps: k8s.AppsV1Api) -> None:
    """DELETE of a Deployment answers a Success Status; a second GET is 404."""
    apps.create_namespaced_deployment("ml", deployment())
    result = apps.delete_namespaced_deployment("web", "ml")
    result = result if isinstance(result, dict) else result.to_dict()
    assert result["status"] == "Success" and result["details"]["name"] == "web"
    status_of(lambda: apps.read_namespaced_deployment("web", "ml"), 404)


def test_priorityclasses_are_cluster_scoped(client: k8s.ApiClient) -> None:
    """scheduling.k8s.io/v1 PriorityClass lives at /apis/scheduling.k8s.io/v1/priorityclasses."""
    api = k8s.SchedulingV1Api(client)
    api.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "burst"}, "value": 1000, "preemptionPolicy": "Never"})
    assert api.read_priority_class("burst").value == 1000
    names = [c.metadata.name for c in api.list_priority_class().items]
    assert "burst" in names and "system-cluster-critical" in names


def test_lease_update_without_resource_version_is_422(client: k8s.ApiClient) -> None:
    """A Lease PUT without metadata.resourceVersion is 422 Invalid, not an unconditional write."""
    api = k8s.CoordinationV1Api(client)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
             "spec": {"holderIdentity": "a"}}
    api.create_namespaced_lease("ml", lease)
    body = status_of(lambda: api.replace_namespaced_lease("leader", "ml", lease), 422)
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Lease"
    assert "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" in body["message"]


def test_hpa_v2_and_v1_are_served(client: k8s.ApiClient) -> None:
    """autoscaling/v2 HorizontalPodAutoscaler, readable through autoscaling/v1 as well."""
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 3}}
    k8s.AutoscalingV2Api(client).create_namespaced_horizontal_pod_autoscaler("ml", hpa)
    assert k8s.AutoscalingV1Api(client).read_namespaced_horizontal_pod_autoscaler("h", "ml").spec.max_replicas == 3


def test_events_create_and_list_by_involved_object(core: k8s.CoreV1Api) -> None:
    """core/v1 events: create, then list with fieldSelector involvedObject.name/kind."""
    for name, kind in (("web", "Deployment"), ("web", "Pod"), ("db", "Deployment")):
        core.create_namespaced_event("ml", {
            "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{name}."},
            "involvedObject": {"kind": kind, "name": name, "namespace": "ml"},
            "reason": "GPUReactor", "message": "m", "type": "Normal"})
    got = core.list_namespaced_event("ml", field_selector="involvedObject.name=web,involvedObject.kind=Deployment")
    assert [(e.involved_object.name, e.involved_object.kind) for e in got.items] == [("web", "Deployment")]


def test_request_counters_by_verb_resource_subresource(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    """Every served request is counted under (verb, resource, subresource) with Kubernetes verb names."""
    apps.create_namespaced_deployment("ml", deployment())
    sim.reset_counters()
    apps.read_namespaced_deployment("web", "ml")
    apps.list_namespaced_deployment("ml")
    apps.patch_namespaced_deployment("web", "ml", {"spec": {"replicas": 2}})
    apps.read_namespaced_deployment_scale("web", "ml")
    status_of(lambda: apps.read_namespaced_deployment("zz", "ml"), 404)
    assert sim.requests == {("get", "deployments", ""): 2, ("list", "deployments", ""): 1,
                            ("patch", "deployments", ""): 1, ("get", "deployments", "scale"): 1}


def test_kubeconfig_drives_the_official_client(sim: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """write_kubeconfig: cluster, user with token, context and current-context the client can load."""
    path = sim.write_kubeconfig(tmp_path / "kubeconfig", token="secret")
    api_client = k8s_config.new_client_from_config(config_file=path)
    try:
        assert api_client.configuration.host == sim.url
        assert api_client.configuration.api_key["BearerToken"] == "Bearer secret"
        names = [n.metadata.name for n in k8s.CoreV1Api(api_client).list_namespace().items]
        assert {"default", "ml"} <= set(names)
    finally:
        api_client.close()


def test_discovery_documents(sim: SimCluster) -> None:
    """/version, /api, /apis and /apis/apps/v1 answer discovery documents kubectl can map from."""
    def get(path: str) -> dict:  # type: ignore[type-arg]
        return json.loads(urllib.request.urlopen(sim.url + path).read())
    assert get("/version")["major"] == "1"
    assert get("/api")["versions"] == ["v1"]
    assert "apps" in [g["name"] for g in get("/apis")["groups"]]
    resources = {r["name"]: r for r in get("/apis/apps/v1")["resources"]}
    assert resources["deployments"]["shortNames"] == ["deploy"] and resources["deployments"]["namespaced"]
    assert resources["deployments/scale"]["kind"] == "Scale"
    assert {r["name"] for r in get("/api/v1")["resources"]} >= {"pods", "events", "namespaces", "nodes"}
