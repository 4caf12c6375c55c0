"""Each kind builds its own patch (cluster/kinds.py `WorkloadKind.patch`): the act step makes one call on the kind,
never a branch on whether an adapter serves it. A built-in controller's kind takes a strategic merge of its pod
template (a CronJob's under its job template); an enabled operator's kind a JSON merge patch of its own fields."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.cluster.kinds import BuiltinKind, Kinds, OperatorKind
from reactor.cluster.workloads import to_workload
from reactor.core.model import Action, WorkloadRef
from reactor.integrations.adapters import BUILTIN

GPU = "nvidia.com/gpu"


def _deployment(kind: str = "Deployment") -> dict[str, Any]:
    pod = {"containers": [{"name": "main", "resources": {"limits": {GPU: "4"}, "requests": {GPU: "4"}}}]}
    template = {"spec": pod}
    spec: dict[str, Any] = {"replicas": 2, "template": template}
    if kind == "CronJob":
        spec = {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": template}}}
    return {"apiVersion": "batch/v1" if kind == "CronJob" else "apps/v1", "kind": kind,
            "metadata": {"name": "w", "namespace": "ml", "uid": "u-1", "resourceVersion": "7"}, "spec": spec}


def _resize(kind: str) -> Action:
    return Action(action="resize-gpu", direction="down", workload=WorkloadRef(kind, "ml", "w"), container="main",
                  from_value=4, to_value=2, strategy="shrink-gpus")


def test_the_lookup_gives_the_operator_its_adapter_and_everything_else_its_controller() -> None:
    kinds = Kinds(BUILTIN, GPU)
    assert isinstance(kinds.of("InferenceService"), OperatorKind)
    assert isinstance(kinds.of("Deployment"), BuiltinKind)
    assert isinstance(Kinds((), GPU).of("InferenceService"), BuiltinKind)  # not enabled: no adapter serves it


@pytest.mark.parametrize("kind,path", [("Deployment", ("spec", "template", "spec")),
                                       ("CronJob", ("spec", "jobTemplate", "spec", "template", "spec"))])
def test_a_builtin_kind_patches_its_template_by_strategic_merge(kind: str, path: tuple[str, ...]) -> None:
    obj = _deployment(kind)
    workload = to_workload(obj, kind, GPU)
    patch = Kinds((), GPU).of(kind).patch(obj, workload, _resize(kind), {"gpu-reactor.io/state": "x"},
                                          cpu_apply_to="pods")
    node: Any = patch
    for key in path:
        node = node[key]
    assert node == {"containers": [{"name": "main", "resources": {"limits": {GPU: "2"}, "requests": {GPU: "2"}}}]}
    assert patch["metadata"] == {"resourceVersion": "7", "annotations": {"gpu-reactor.io/state": "x"}}
