"""Objects as the real API server writes and serves them: `managedFields` on create and update, and the
PartialObjectMetadata forms under content negotiation, over real HTTP."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import deployment

PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
# What client-go's metadata client sends for a list (k8s.io/client-go/metadata/metadata.go `List`).
METADATA_CLIENT_LIST = f"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," \
                       f"{PARTIAL_LIST},application/json"


def raw(sim: SimCluster, method: str, path: str, *, accept: str | None = None, body: Any = None,
        headers: dict[str, str] | None = None) -> tuple[int, Any]:
    url = urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    sent = dict(headers or {})
    if accept:
        sent["Accept"] = accept
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    conn.request(method, path, body=data, headers=sent)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    if "watch=" in path:
        return resp.status, [json.loads(line) for line in text.splitlines() if line.strip()]
    return resp.status, json.loads(text)


DEPLOYMENTS = "/apis/apps/v1/namespaces/ml/deployments"


def create(sim: SimCluster, name: str = "web", user_agent: str = "kubectl/v1.28.2 (linux/amd64) kubernetes/89a4ea3",
           query: str = "") -> dict[str, Any]:
    body = deployment(name, gpus=1)
    body["metadata"]["labels"] = {"app": name}
    code, obj = raw(sim, "POST", DEPLOYMENTS + query, body=body, headers={"User-Agent": user_agent})
    assert code == 201, obj
    return obj


# --- managedFields ---------------------------------------------------------------------------------------


def test_a_create_records_the_user_agents_prefix_as_manager_of_every_field_it_set(sim: SimCluster) -> None:
    """Upstream: handlers/rest.go `managerOrUserAgent` (the User-Agent up to "/"), managedfields' Update entry with
    FieldsV1; internal/stripmeta.go leaves name, uid, resourceVersion... out; a keyed list's item is k:{"name":..}."""
    obj = create(sim)
    [entry] = obj["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsType")} == {
        "manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1"}
    assert entry["time"].endswith("Z") and "subresource" not in entry
    fields = entry["fieldsV1"]
    assert set(fields["f:metadata"]) >= {"f:labels"} and "f:name" not in fields["f:metadata"]
    assert "f:uid" not in fields["f:metadata"] and "f:status" not in fields, "status belongs to its subresource"
    containers = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(containers) == {'k:{"name":"main"}'} and "." in containers['k:{"name":"main"}']
    assert fields["f:metadata"]["f:labels"]["."] == {}


def test_the_field_manager_parameter_names_the_manager(sim: SimCluster) -> None:
    obj = create(sim, query="?fieldManager=gpu-reactor")
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["gpu-reactor"]


def test_an_update_by_another_manager_takes_the_fields_it_changed(sim: SimCluster) -> None:
    """Upstream: managedfields Update: the updater owns the fields it changed; the previous owner loses them."""
    create(sim)
    patch = {"spec": {"replicas": 3}}
    code, obj = raw(sim, "PATCH", DEPLOYMENTS + "/web", body=patch,
                    headers={"User-Agent": "gpu-reactor", "Content-Type": "application/strategic-merge-patch+json"})
    assert code == 200, obj
    entries = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert entries["gpu-reactor"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in entries["kubectl"]["fieldsV1"]["f:spec"]
    assert obj["metadata"]["generation"] == 2


def test_the_controllers_status_writes_are_their_own_status_entry(sim: SimCluster) -> None:
    """Upstream: a status write is an Update with subresource "status" (kube-controller-manager's deployment
    controller and replicaset controller), and metadata.generation / status.observedGeneration are set."""
    create(sim)
    sim.settle()
    obj = sim.get("deployments", "ml", "web")
    status_entries = [e for e in obj["metadata"]["managedFields"] if e.get("subresource") == "status"]
    assert [e["manager"] for e in status_entries] == ["kube-controller-manager"]
    assert set(status_entries[0]["fieldsV1"]) == {"f:status"}
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 1
    [rs] = sim.list("replicasets", "ml")
    assert {e["manager"] for e in rs["metadata"]["managedFields"]} == {"kube-controller-manager"}


def test_a_write_that_changes_nothing_keeps_the_entries_and_the_version(sim: SimCluster) -> None:
    obj = create(sim)
    code, again = raw(sim, "PATCH", DEPLOYMENTS + "/web", body={"metadata": {"labels": obj["metadata"]["labels"]}},
                      headers={"User-Agent": "someone-else", "Content-Type": "application/merge-patch+json"})
    assert code == 200
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


# --- PartialObjectMetadata -------------------------------------------------------------------------------


def test_a_list_as_partial_object_metadata_list_keeps_each_items_metadata_only(sim: SimCluster) -> None:
    """Upstream: handlers/response.go `asPartialObjectMetadataList`: kind PartialObjectMetadataList of meta.k8s.io/v1,
    the list's resourceVersion, each item kind PartialObjectMetadata with its whole metadata (managedFields too)."""
    whole = create(sim)
    create(sim, "other")
    code, answer = raw(sim, "GET", DEPLOYMENTS, accept=METADATA_CLIENT_LIST)
    assert code == 200, answer
    assert (answer["kind"], answer["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert answer["metadata"]["resourceVersion"]
    items = {i["metadata"]["name"]: i for i in answer["items"]}
    assert set(items) == {"web", "other"}
    assert items["web"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                            "metadata": whole["metadata"]}


def test_a_get_as_partial_object_metadata(sim: SimCluster, apps: k8s.AppsV1Api) -> None:
    whole = create(sim)
    code, answer = raw(sim, "GET", DEPLOYMENTS + "/web", accept=PARTIAL)
    assert code == 200
    assert answer == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": whole["metadata"]}


def test_the_other_shape_is_not_acceptable(sim: SimCluster) -> None:
    """Upstream: asPartialObjectMetadata on a list, asPartialObjectMetadataList on an object: 406 NotAcceptable."""
    create(sim)
    code, status = raw(sim, "GET", DEPLOYMENTS, accept=PARTIAL)
    assert (code, status["reason"]) == (406, "NotAcceptable")
    assert "you requested PartialObjectMetadata, but the requested object is a list" in status["message"]
    code, status = raw(sim, "GET", DEPLOYMENTS + "/web", accept=PARTIAL_LIST)
    assert (code, status["reason"]) == (406, "NotAcceptable")


def test_a_form_of_another_group_is_not_acceptable_unless_another_clause_is(sim: SimCluster) -> None:
    """Upstream: negotiate.go passes over a clause the endpoint cannot transform to (rest.go
    AllowsMediaTypeTransform: meta.k8s.io only); with no clause left, 406."""
    create(sim)
    code, status = raw(sim, "GET", DEPLOYMENTS, accept="application/json;as=PartialObjectMetadataList;g=apps;v=v1")
    assert (code, status["reason"]) == (406, "NotAcceptable")
    code, answer = raw(sim, "GET", DEPLOYMENTS,
                       accept="application/json;as=PartialObjectMetadataList;g=apps;v=v1,application/json")
    assert code == 200 and answer["kind"] == "DeploymentList"


def test_a_watch_as_partial_object_metadata_sends_metadata_only_events(sim: SimCluster) -> None:
    """Upstream: handlers/watch.go newWatchEmbeddedEncoder converts each event's object (what a metadata informer
    watches with: client-go metadata.go `Watch` asks for as=PartialObjectMetadata)."""
    whole = create(sim)
    code, events = raw(sim, "GET", DEPLOYMENTS + "?watch=1&resourceVersion=0&timeoutSeconds=1", accept=PARTIAL)
    assert code == 200
    assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "PartialObjectMetadata")]
    assert events[0]["object"]["metadata"] == whole["metadata"]


# --- lists in pages ---------------------------------------------------------------------------------------


def test_a_list_in_pages_of_limit_with_continue_tokens(sim: SimCluster) -> None:
    """Upstream: storage/etcd3/store.go GetList (key order, `limit` items, `continue`, `remainingItemCount`, every
    page at the first page's resourceVersion) and storage/continue.go EncodeContinue ({"v","rv","start"}, base64
    RawURLEncoding); client-go's pager (tools/pager) follows the tokens until one is empty."""
    for name in ("c", "a", "b-2", "b"):
        create(sim, name)
    code, first = raw(sim, "GET", DEPLOYMENTS + "?limit=2")
    assert code == 200 and [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    meta = first["metadata"]
    assert meta["remainingItemCount"] == 2 and meta["continue"]
    token = json.loads(base64.urlsafe_b64decode(meta["continue"] + "=" * (-len(meta["continue"]) % 4)))
    assert token == {"v": "meta.k8s.io/v1", "rv": int(meta["resourceVersion"]), "start": "b\x00"}
    create(sim, "d")  # after the first page: the pages keep the first page's version
    code, second = raw(sim, "GET", DEPLOYMENTS + f"?limit=2&continue={meta['continue']}")
    assert [i["metadata"]["name"] for i in second["items"]] == ["b-2", "c"]
    assert second["metadata"]["resourceVersion"] == meta["resourceVersion"]
    code, last = raw(sim, "GET", DEPLOYMENTS + f"?limit=2&continue={second['metadata']['continue']}")
    assert [i["metadata"]["name"] for i in last["items"]] == ["d"] and "continue" not in last["metadata"]


def test_a_continue_token_that_does_not_decode_is_a_bad_request(sim: SimCluster) -> None:
    code, status = raw(sim, "GET", DEPLOYMENTS + "?limit=2&continue=bm90LWpzb24")
    assert (code, status["reason"]) == (400, "BadRequest") and "invalid continue token" in status["message"]


def test_the_gateway_reads_a_list_page_by_page(sim: SimCluster) -> None:
    """The reactor's informers list in pages of 500 (reactor/cluster/kube/gateway.py `list_page`)."""
    from prometheus_client import CollectorRegistry

    from reactor.cluster.kube import KubeGateway
    from reactor.cluster.kube import gateway as gateway_module
    from reactor.config.settings import Kube
    from reactor.core.metrics import Metrics

    for name in ("a", "b", "c"):
        create(sim, name)
    kube = KubeGateway.for_url(sim.url, Kube(qps=1000, burst=1000), Metrics(CollectorRegistry()))
    page, gateway_module.LIST_PAGE = gateway_module.LIST_PAGE, 2
    try:
        sim.reset_counters()
        items, version = kube.list_page("Deployment", "ml")
        assert [o["metadata"]["name"] for o in items] == ["a", "b", "c"] and version
        assert sim.requests[("list", "deployments", "")] == 2
    finally:
        gateway_module.LIST_PAGE = page
        kube.close()
