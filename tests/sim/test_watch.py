"""Watches as kube-apiserver's watch cache serves them (staging/src/k8s.io/apiserver/pkg/storage/cacher,
pkg/endpoints/handlers/watch.go), over real HTTP, with the official client's `watch.Watch` and raw reads."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client import ApiException

from reactor_sim import SimCluster
from tests.sim.builders import deployment, gpu_node, pod


def _raw_watch(sim: SimCluster, path: str, token: str | None = None) -> tuple[int, dict[str, str], list[Any]]:
    """GET a watch URL; (status, headers, the decoded newline-delimited events) once the stream ends."""
    url = urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    resp = conn.getresponse()
    body = resp.read()  # http.client decodes the chunked body; it returns only after the last chunk
    conn.close()
    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, lines


def _types(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_watch_from_resource_version_0_starts_with_synthetic_added_events(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Upstream: a watch with resourceVersion unset or "0" begins with an ADDED event per existing object."""
    sim.apply([pod("a"), pod("b")])
    events = list(k8s_watch.Watch().stream(core.list_namespaced_pod, "ml", resource_version="0", timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_from_a_list_resource_version_streams_only_later_changes(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Upstream: a watch from a specific resourceVersion delivers every change after it, in order, and a
    DELETED event carries the object's last state at the deletion's resourceVersion."""
    sim.apply(pod("old"))
    rv = core.list_namespaced_pod("ml").metadata.resource_version
    sim.apply(pod("new"))
    core.patch_namespaced_pod("new", "ml", {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("new", "ml")
    path = f"/api/v1/namespaces/ml/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    status, headers, events = _raw_watch(sim, path)
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert _types(events) == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    assert events[2]["object"]["metadata"]["labels"] == {"x": "1"}


def test_a_live_watch_sees_writes_made_while_it_is_open(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """The official client's Watch().stream over a long-lived chunked response, as informers use it."""
    rv = core.list_namespaced_pod("ml").metadata.resource_version
    w = k8s_watch.Watch()
    writer = threading.Timer(0.3, lambda: sim.apply(pod("late")))
    writer.start()
    seen = []
    for event in w.stream(core.list_namespaced_pod, "ml", resource_version=rv, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    writer.join()
    assert seen == [("ADDED", "late")]


def test_watch_across_all_namespaces_and_of_a_cluster_scoped_resource(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    rv = core.list_node().metadata.resource_version
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    sim.apply([pod("a"), pod("b", ns="other"), gpu_node("gpu-node-9")])
    pods = k8s_watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1)
    assert [(e["object"].metadata.namespace, e["object"].metadata.name) for e in pods] == [("ml", "a"), ("other", "b")]
    nodes = k8s_watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=1)
    assert [(e["type"], e["object"].metadata.name) for e in nodes] == [("ADDED", "gpu-node-9")]


def test_selectors_turn_objects_leaving_the_selection_into_deleted_events(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """cacheWatcher.convertToWatchEvent: an object whose labels stop matching is DELETED for the watch,
    one that starts matching is ADDED; a field selector filters the same way."""
    sim.apply([pod("a"), pod("b")])
    rv = core.list_namespaced_pod("ml").metadata.resource_version
    core.patch_namespaced_pod("a", "ml", {"metadata": {"labels": {"tier": "gpu"}}})
    core.patch_namespaced_pod("b", "ml", {"metadata": {"labels": {"tier": "cpu"}}})
    core.patch_namespaced_pod("a", "ml", {"metadata": {"labels": {"tier": "cpu"}}})
    query = f"watch=true&resourceVersion={rv}&timeoutSeconds=1"
    _, _, labelled = _raw_watch(sim, f"/api/v1/namespaces/ml/pods?{query}&labelSelector=tier%3Dgpu")
    assert _types(labelled) == [("ADDED", "a"), ("DELETED", "a")]
    assert labelled[1]["object"]["metadata"]["labels"] == {"tier": "gpu"}  # the content before it left
    _, _, named = _raw_watch(sim, f"/api/v1/namespaces/ml/pods?{query}&fieldSelector=metadata.name%3Db")
    assert _types(named) == [("MODIFIED", "b")]


def test_bookmarks_carry_only_the_resource_version(sim: SimCluster) -> None:
    """allowWatchBookmarks=true: BOOKMARK events whose object is the watched kind with only
    metadata.resourceVersion set, at least as new as every event delivered before it."""
    sim.set_bookmark_interval(0.2)
    _, _, events = _raw_watch(sim, "/apis/apps/v1/namespaces/ml/deployments?watch=1&allowWatchBookmarks=true"
                                   "&timeoutSeconds=1")
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert marks and {e["type"] for e in events} == {"BOOKMARK"}
    assert marks[0]["object"] == {"kind": "Deployment", "apiVersion": "apps/v1",
                                  "metadata": {"resourceVersion": str(sim.store.resource_version)}}
    _, _, plain = _raw_watch(sim, "/apis/apps/v1/namespaces/ml/deployments?watch=1&timeoutSeconds=1")
    assert plain == []  # no bookmarks unless asked for


def test_a_too_old_resource_version_is_an_expired_error_event_in_a_200_stream() -> None:
    """Upstream's watch cache answers a resourceVersion older than its window with an errWatcher: HTTP 200,
    one ERROR event holding a 410 `Expired` Status "too old resource version: X (oldest-1)", then the end."""
    with SimCluster(watch_history=3).start() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        first = sim.apply(pod("p0"))["metadata"]["resourceVersion"]
        kept = [sim.apply(pod(f"p{i}"))["metadata"]["resourceVersion"] for i in range(1, 5)][-3:]
        status, _, events = _raw_watch(sim, f"/api/v1/namespaces/ml/pods?watch=1&resourceVersion={first}")
        assert status == 200 and [e["type"] for e in events] == ["ERROR"]
        horizon = int(kept[0]) - 1
        assert events[0]["object"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": f"too old resource version: {first} ({horizon})",
                                       "reason": "Expired", "code": 410}
        _, _, resumed = _raw_watch(sim, f"/api/v1/namespaces/ml/pods?watch=1&resourceVersion={horizon}"
                                        "&timeoutSeconds=1")
        assert [e["object"]["metadata"]["resourceVersion"] for e in resumed] == kept


def test_the_official_client_raises_410_on_an_expired_watch() -> None:
    with SimCluster(watch_history=1).start() as sim, k8s.ApiClient(k8s.Configuration(host=sim.url)) as c:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        first = sim.apply(pod("p0"))["metadata"]["resourceVersion"]
        sim.apply([pod("p1"), pod("p2")])
        with pytest.raises(ApiException) as info:
            list(k8s_watch.Watch().stream(k8s.CoreV1Api(c).list_namespaced_pod, "ml", resource_version=first,
                                          timeout_seconds=1))
        assert info.value.status == 410


def test_timeout_seconds_ends_the_stream_with_a_clean_last_chunk(sim: SimCluster) -> None:
    """timeoutSeconds: the server closes the watch by ending the chunked body (no error, no reset)."""
    status, _, events = _raw_watch(sim, "/api/v1/namespaces/ml/pods?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert status == 200 and events == []


@pytest.mark.parametrize("query, message", [
    ("labelSelector=a%20in%20(", "unable to parse requirement"),
    ("fieldSelector=spec.bogus%3D1", "field label not supported: spec.bogus"),
    ("resourceVersion=abc", 'invalid resource version "abc"'),
])
def test_a_malformed_watch_is_a_400_before_any_stream(sim: SimCluster, query: str, message: str) -> None:
    url = urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    conn.request("GET", f"/api/v1/namespaces/ml/pods?watch=1&{query}")
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 400 and body["reason"] == "BadRequest" and message in body["message"]


def test_rbac_authorizes_watch_as_its_own_verb() -> None:
    """A list URL with watch=1 is the `watch` verb (RequestInfoFactory): `list` alone does not allow it."""
    sa = "system:serviceaccount:ml:reader"
    with SimCluster(rbac=True).start() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        sim.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": "ml"}})
        sim.add_token("t", user=sa)
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "r", "namespace": "ml"},
                "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]}
        sim.apply([role, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "r", "namespace": "ml"},
                          "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "ml"}],
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}])
        path = "/apis/apps/v1/namespaces/ml/deployments?watch=1&timeoutSeconds=1"
        status, _, body = _raw_watch(sim, path, "t")
        assert status == 403 and 'cannot watch resource "deployments"' in body[0]["message"]
        role["rules"][0]["verbs"] = ["list", "watch"]
        sim.apply(role)
        sim.apply(deployment("web"))
        status, _, events = _raw_watch(sim, path.replace("watch=1", "watch=1&resourceVersion=0"), "t")
        assert status == 200 and _types(events) == [("ADDED", "web")]


@pytest.mark.parametrize("value, watches", [("true", True), ("1", True), ("True", True), ("yes", True),
                                            ("false", False), ("0", False), ("FALSE", False)])
def test_the_watch_parameter_is_read_as_apimachinery_converts_a_bool(sim: SimCluster, value: str,
                                                                      watches: bool) -> None:
    """Convert_Slice_string_To_bool: only "0" and "false" (any case) are false; a list answers a PodList."""
    sim.apply(pod("a"))
    status, headers, lines = _raw_watch(sim, f"/api/v1/namespaces/ml/pods?watch={value}&timeoutSeconds=1")
    assert status == 200
    if watches:
        assert headers["transfer-encoding"] == "chunked" and _types(lines) == [("ADDED", "a")]
    else:
        assert lines[0]["kind"] == "PodList" and [p["metadata"]["name"] for p in lines[0]["items"]] == ["a"]
