"""The operators' real CRDs (verbatim upstream copies in ../shared/crds, see its README) on the embedded cluster.

Contract (issue 24): kube-apiserver's apiextensions-apiserver accepts each of these CustomResourceDefinitions,
serves every version marked `served`, and on every write of a custom object prunes the fields its structural
schema does not name (k8s.io/apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go PruneWithOptions:
unknown fields dropped, `x-kubernetes-preserve-unknown-fields` subtrees kept, apiVersion/kind/metadata skipped at
the root) and decodes the root metadata into ObjectMeta (pkg/apiserver/schema/objectmeta/coerce.go Coerce: any
other key there is dropped). The trimmed CRDs of tests/fixtures/crds stand in elsewhere; these tests need the
real ones and skip, saying so, where ../shared is absent (CI always has it).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor_sim import SimCluster

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "crds"
FILES = sorted(p.name for p in SHARED.glob("*.yaml")) + sorted(
    f"kueue-v0.19.2/{p.name}" for p in (SHARED / "kueue-v0.19.2").glob("*.yaml"))
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent: the operators' real CRDs "
                                                               "(../shared/crds) are needed for these contract tests")
GPU = "nvidia.com/gpu"


@functools.cache
def _crd(name: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc: dict[str, Any] = yaml.load((SHARED / name).read_text(encoding="utf-8"), Loader=loader)
    return doc


def _install(sim: SimCluster, *names: str) -> None:
    for name in names:
        sim.apply(_crd(name))


@needs_shared
@pytest.mark.parametrize("name", FILES or ["(none)"])
def test_every_upstream_crd_is_accepted_and_each_served_version_served(sim: SimCluster, name: str) -> None:
    crd = _crd(name)
    if name.startswith("kueue-v0.19.2/"):  # the same CRD names as the v0.11.9 files: one at a time
        sim.apply(crd)
    else:
        _install(sim, name)
    spec = crd["spec"]
    stored = sim.get("customresourcedefinitions", None, crd["metadata"]["name"])
    assert stored["spec"]["names"]["kind"] == spec["names"]["kind"]
    served = [v["name"] for v in spec["versions"] if v.get("served")]
    for version in served:
        res = sim.registry.by_path(spec["group"], version, spec["names"]["plural"])
        assert res is not None and res.kind == spec["names"]["kind"], (name, version)
        assert sim.registry.schema_of(res, f"{spec['group']}/{version}"), (name, version)


def _isvc(**predictor: Any) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama", "namespace": "ml", "labels": {"team": "search"}},
            "spec": {"predictor": {"minReplicas": 1, "model": {"modelFormat": {"name": "huggingface"},
                                                               "resources": {"limits": {GPU: "4"}}}, **predictor}}}


@needs_shared
def test_unknown_fields_are_pruned_under_the_structural_schema_and_known_ones_kept(sim: SimCluster) -> None:
    _install(sim, "serving.kserve.io_inferenceservices.yaml")
    body = _isvc(bogus=True, priorityClassName="high-priority-gpu")
    body["spec"]["predictor"]["model"]["notAField"] = "x"
    body["spec"]["alsoNotAField"] = {"a": 1}
    body["metadata"]["notObjectMeta"] = "x"
    sim.apply(body)
    stored = sim.get("inferenceservices", "ml", "llama")
    predictor = stored["spec"]["predictor"]
    assert "bogus" not in predictor and "notAField" not in predictor["model"]
    assert "alsoNotAField" not in stored["spec"] and "notObjectMeta" not in stored["metadata"]
    assert predictor["priorityClassName"] == "high-priority-gpu"
    assert predictor["model"]["resources"] == {"limits": {GPU: "4"}}
    assert stored["metadata"]["labels"] == {"team": "search"}


@needs_shared
def test_a_preserve_unknown_fields_subtree_keeps_what_it_does_not_name(sim: SimCluster) -> None:
    """KServe's InferenceService status is `x-kubernetes-preserve-unknown-fields: true`: a field it does not name is
    kept there (PruneWithOptions stops at such a node), while its named fields are still pruned below."""
    _install(sim, "serving.kserve.io_inferenceservices.yaml")
    sim.apply(_isvc())
    res = sim.registry.by_plural("inferenceservices")
    with sim.store.lock:
        sim.api.patch(res, "ml", "llama", "application/merge-patch+json",
                      {"status": {"observedGeneration": 1, "extraByController": {"x": 1}}}, subresource="status")
    status = sim.get("inferenceservices", "ml", "llama")["status"]
    assert status["extraByController"] == {"x": 1} and status["observedGeneration"] == 1


@needs_shared
def test_pod_template_metadata_keeps_labels_where_the_schema_names_them(sim: SimCluster) -> None:
    """KubeRay's CRD names the pod template's metadata fields (controller-gen generateEmbeddedObjectMeta): labels
    and annotations there survive, an unknown key beside them does not."""
    _install(sim, "ray.io_rayclusters.yaml")
    template = {"metadata": {"labels": {"app": "ray"}, "annotations": {"a": "b"}, "bogus": 1},
                "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.40.0"}]}}
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray", "namespace": "ml"},
               "spec": {"upgradeStrategy": {"type": "Recreate"},
                        "headGroupSpec": {"rayStartParams": {}, "template": template}}})
    stored = sim.get("rayclusters", "ml", "ray")["spec"]
    assert stored["headGroupSpec"]["template"]["metadata"] == {"labels": {"app": "ray"}, "annotations": {"a": "b"}}
    assert stored["upgradeStrategy"] == {"type": "Recreate"}


@needs_shared
def test_kueue_v0_19_serves_v1beta2_beside_the_deprecated_v1beta1(sim: SimCluster) -> None:
    """What the reactor reads to tell Kueue v0.15+ (a mutable priority label) from v0.14 and older."""
    _install(sim, "kueue.x-k8s.io_workloadpriorityclasses.yaml")
    assert sim.registry.by_path("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses") is None
    sim.apply(_crd("kueue-v0.19.2/kueue.x-k8s.io_workloadpriorityclasses.yaml"))
    assert sim.registry.by_path("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses") is not None
    assert sim.registry.by_path("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses") is not None
