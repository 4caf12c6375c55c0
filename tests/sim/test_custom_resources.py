"""Custom resources served from CustomResourceDefinitions, as kube-apiserver's apiextensions-apiserver serves them.

Each test names the upstream behaviour it pins; the CRDs are the trimmed operator CRDs of tests/fixtures/crds.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reactor_sim import SimCluster

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "notebooks"


def _notebook(name: str = "jupyter", **spec_extra: Any) -> dict[str, Any]:
    container = {"name": "notebook", "image": "jupyter/scipy:1", "workingDir": "/home/jovyan",
                 "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": [container]}}, **spec_extra}}


@pytest.fixture
def custom(sim: SimCluster, client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    sim.load_manifests(CRDS / "kubeflow.org_notebooks.yaml")
    return k8s.CustomObjectsApi(client)


def _status(e: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    return json.loads(e.value.body)


def test_creating_a_crd_registers_the_resource_in_discovery(sim: SimCluster, custom: k8s.CustomObjectsApi) -> None:
    """apiextensions-apiserver: an established CRD appears in /apis and /apis/GROUP/VERSION (the discovery
    controller), so clients map the kind to its URL."""
    with urllib.request.urlopen(f"{sim.url}/apis") as r:
        groups = {g["name"]: g for g in json.loads(r.read())["groups"]}
    assert groups[GROUP]["preferredVersion"]["groupVersion"] == "kubeflow.org/v1"
    with urllib.request.urlopen(f"{sim.url}/apis/{GROUP}/{VERSION}") as r:
        names = {e["name"] for e in json.loads(r.read())["resources"]}
    assert names == {"notebooks", "notebooks/status"}


def test_unknown_fields_are_pruned_unless_the_schema_preserves_them(custom: k8s.CustomObjectsApi) -> None:
    """Structural pruning (apiextensions-apiserver pkg/apiserver/schema/pruning): fields the schema does not
    name are dropped on create; under x-kubernetes-preserve-unknown-fields they are kept."""
    body = _notebook(bogus="dropped")
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8888}]
    body["spec"]["template"]["extra"] = 1
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, body)
    assert "bogus" not in created["spec"] and "extra" not in created["spec"]["template"]
    assert created["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 8888}]
    assert created["metadata"]["generation"] == 1 and created["metadata"]["resourceVersion"]


def test_wrong_types_and_missing_required_fields_are_422(custom: k8s.CustomObjectsApi) -> None:
    """Schema validation (kube-openapi validate): a wrong type is `Invalid value: "string": ... in body must be
    of type integer`, a missing required field `Required value`; nothing is stored."""
    body = _notebook()
    body["spec"]["template"]["spec"]["containers"][0]["name"] = 7
    with pytest.raises(ApiException) as e:
        custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, body)
    assert e.value.status == 422
    assert ('spec.template.spec.containers[0].name: Invalid value: "integer": spec.template.spec.containers[0].name '
            'in body must be of type string: "integer"') in _status(e)["message"]
    body = _notebook()
    del body["spec"]["template"]["spec"]["containers"]
    with pytest.raises(ApiException) as e:
        custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, body)
    assert _status(e)["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.containers"}]
    with pytest.raises(ApiException) as e:
        custom.get_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter")
    assert e.value.status == 404


def test_strategic_merge_patch_is_415_for_custom_resources(sim: SimCluster, custom: k8s.CustomObjectsApi) -> None:
    """apiextensions-apiserver serves no strategic merge patch (custom resources have no patch strategy): 415
    UnsupportedMediaType, whose message lists the media types it accepts."""
    custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, _notebook())
    request = urllib.request.Request(f"{sim.url}/apis/{GROUP}/{VERSION}/namespaces/ml/{PLURAL}/jupyter",
                                     data=b'{"metadata": {"labels": {"a": "b"}}}', method="PATCH",
                                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request)
    body = json.loads(e.value.read())
    assert (e.value.code, body["reason"]) == (415, "UnsupportedMediaType")
    assert "application/merge-patch+json" in body["message"] and "strategic" not in body["message"].split("(got")[0]


def test_merge_patch_replaces_lists_whole_and_is_conditional(custom: k8s.CustomObjectsApi) -> None:
    """RFC 7386 merge patch on a custom resource: a list in the patch replaces the stored list; a stale
    metadata.resourceVersion in the patch is 409 Conflict and changes nothing; a spec change bumps generation."""
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, _notebook())
    sidecar = {"name": "sidecar", "image": "proxy:1"}
    patch = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
             "spec": {"template": {"spec": {"containers": [sidecar]}}}}
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter", patch,
                                                    _content_type="application/merge-patch+json")
    assert patched["spec"]["template"]["spec"]["containers"] == [sidecar]
    assert patched["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as e:
        custom.patch_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter", patch,
                                              _content_type="application/merge-patch+json")
    assert e.value.status == 409
    labelled = custom.patch_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter",
                                                     {"metadata": {"labels": {"team": "a"}}},
                                                     _content_type="application/merge-patch+json")
    assert labelled["metadata"]["generation"] == 2  # metadata only: generation unchanged


def test_json_patch_applies_and_is_validated(custom: k8s.CustomObjectsApi) -> None:
    """RFC 6902 JSON patch on a custom resource; the result is validated against the schema like a create."""
    custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, _notebook())
    path = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter",
                                                    [{"op": "replace", "path": path, "value": "1"}],
                                                    _content_type="application/json-patch+json")
    assert patched["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    with pytest.raises(ApiException) as e:
        custom.patch_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter",
                                              [{"op": "replace", "path": "/spec/template/spec/containers", "value": 3}],
                                              _content_type="application/json-patch+json")
    assert e.value.status == 422


def test_owner_references_to_a_custom_resource_are_garbage_collected(sim: SimCluster,
                                                                      custom: k8s.CustomObjectsApi) -> None:
    """The garbage collector follows ownerReferences to custom resources too: deleting the Notebook deletes the
    StatefulSet whose controller it is, and that StatefulSet's pods."""
    nb = custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, _notebook())
    owner = [{"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "name": "jupyter", "uid": nb["metadata"]["uid"],
              "controller": True, "blockOwnerDeletion": True}]
    template = {"metadata": {"labels": {"statefulset": "jupyter"}}, "spec": nb["spec"]["template"]["spec"]}
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "jupyter", "namespace": "ml", "ownerReferences": owner},
               "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"statefulset": "jupyter"}},
                        "template": template}})
    sim.settle()
    assert [p["metadata"]["name"] for p in sim.list("pods", "ml")] == ["jupyter-0"]
    custom.delete_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "jupyter")
    assert sim.list("statefulsets", "ml") == [] and sim.list("pods", "ml") == []


def test_enum_bounds_int_or_string_and_nullable_are_validated(sim: SimCluster, client: k8s.ApiClient) -> None:
    """kube-openapi validation of a structural schema: `enum` (Unsupported value), `minimum` ("should be greater
    than or equal to"), `x-kubernetes-int-or-string` (an integer or a string, nothing else) and `nullable` (null
    only where allowed); a valid object is stored."""
    props = {"mode": {"type": "string", "enum": ["a", "b"]}, "count": {"type": "integer", "minimum": 0},
             "port": {"x-kubernetes-int-or-string": True}, "note": {"type": "string", "nullable": True}}
    sim.apply({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}})
    api = k8s.CustomObjectsApi(client)

    def create(spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}
        return api.create_namespaced_custom_object("example.com", "v1", "ml", "widgets", body)

    for spec, cause in (({"mode": "c"}, 'spec.mode: Unsupported value: "c": supported values: "a", "b"'),
                        ({"count": -1}, "spec.count: Invalid value: -1: spec.count in body should be greater than "
                                        "or equal to 0"),
                        ({"port": True}, 'spec.port: Invalid value: "boolean": spec.port in body must be of type '
                                         'integer or string: "boolean"'),
                        ({"mode": None}, 'spec.mode: Invalid value: "null": spec.mode in body must be of type '
                                         'string: "null"')):
        with pytest.raises(ApiException) as e:
            create(spec)
        assert e.value.status == 422 and cause in _status(e)["message"], _status(e)["message"]
    created = create({"mode": "a", "count": 0, "port": "http", "note": None})
    assert created["spec"] == {"mode": "a", "count": 0, "port": "http", "note": None}
