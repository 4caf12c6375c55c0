"""The chart's RBAC for N allowed namespaces is exactly what tests/deploy/test_rbac_proof.py proves minimal.

The proof shows, on the embedded cluster with RBAC on, that every grant of deploy/reactor is needed by a
flow and that the flows succeed with them. Here the chart's roles must hold exactly those grants, be bound
once in each allowed namespace and nowhere else, and the proof's flows must succeed with the chart's
objects in place of the kustomize build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_rbac_proof import (
    AFTER,
    CACHE_NEEDED,
    CHANGES,
    EXPECTED,
    NEEDED_BY,
    SA_USER,
    STATE_NEEDED,
    _cluster,
    _grants,
    _reactor,
)
from tests.helm.charts import render
from tests.support import NAMESPACE


def _installed(allow: list[str]) -> list[dict[str, Any]]:
    """The chart's objects as `helm install` creates them, plus the namespaces that exist beforehand."""
    extra = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in allow if ns != NAMESPACE]
    return extra + render({"namespace": {"create": True}, "policy": {"namespaces": {"allow": allow}}})


SUBJECT = [{"kind": "ServiceAccount", "name": "gpu-reactor", "namespace": "gpu-reactor"}]


@pytest.mark.parametrize("count", [1, 3, 12])
def test_the_grants_are_the_proven_ones_bound_once_per_allowed_namespace(count: int) -> None:
    allowed = [NAMESPACE] + [f"team-{i}" for i in range(1, count)]
    objs = render({"policy": {"namespaces": {"allow": allowed}}})
    assert sorted((g, r, v) for _, g, r, v in _grants(objs)) == sorted([*NEEDED_BY, *CACHE_NEEDED, *STATE_NEEDED])
    bindings = [o for o in objs if o["kind"] == "RoleBinding" and o["roleRef"]["kind"] == "ClusterRole"]
    for role in ("gpu-reactor-workloads", "gpu-reactor-operators"):  # both bound once per allowed namespace
        bound = [b for b in bindings if b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                                          "kind": "ClusterRole", "name": role}]
        assert sorted(b["metadata"]["namespace"] for b in bound) == sorted(allowed)
    assert all(b["subjects"] == SUBJECT for b in bindings) and len(bindings) == 2 * count
    (cluster_binding,) = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    assert cluster_binding["roleRef"]["name"] == "gpu-reactor-priorityclasses"
    roles = [o for o in objs if o["kind"] == "ClusterRole"]
    (cluster_grants,) = [_grants([o]) for o in roles if o["metadata"]["name"] == "gpu-reactor-priorityclasses"]
    assert [g[1:] for g in cluster_grants] == [("scheduling.k8s.io", "priorityclasses", "list"),
                                               ("scheduling.k8s.io", "priorityclasses", "watch"),
                                               ("kueue.x-k8s.io", "clusterqueues", "get"),
                                               ("kueue.x-k8s.io", "workloadpriorityclasses", "list")]
    (lease_role,) = [o for o in objs if o["kind"] == "Role"]  # the workload grants come from the one ClusterRole
    assert (lease_role["metadata"]["namespace"], lease_role["rules"][1]["resourceNames"]) == (
        "gpu-reactor", ["gpu-reactor-verifier", "gpu-reactor-state"])


@pytest.mark.parametrize("flow", ["deployment-resize", "cronjob-via-job", "set-priority"])
def test_the_proofs_flows_succeed_with_the_chart_objects(token_file: Path, flow: str) -> None:
    """The embedded cluster with RBAC on, the chart's objects instead of the kustomize build."""
    sim = _cluster(_installed(["team-a", NAMESPACE]))
    r = _reactor(sim, token_file)
    try:
        run, expected = EXPECTED[flow]
        answer = run(r)
        assert (answer.code, answer.results) == (200, expected), answer
        assert CHANGES[flow](sim) == AFTER[flow] and not sim.denied
    finally:
        r.service.kube.close()
        sim.stop()


def test_without_its_namespace_in_the_list_the_reactor_is_refused(token_file: Path) -> None:
    sim = _cluster(_installed(["team-a"]))
    r = _reactor(sim, token_file)
    try:
        answer = EXPECTED["deployment-resize"][0](r)
        assert answer.results == {("failed", "api-error")}
        assert all(f'User "{SA_USER}" cannot' in o["detail"] for o in answer.outcomes)
    finally:
        r.service.kube.close()
        sim.stop()


def test_knative_reads_come_and_go_with_the_inferenceservice_adapter() -> None:
    """KServe's serverless mode: get (never patch) on Knative's revisions, configurations and services, rendered
    only where `adapters.builtin` enables InferenceService, as the doctor asks (operator_grants)."""
    knative = {("serving.knative.dev", r, "get") for r in ("revisions", "configurations", "services")}
    for builtin, expected in ((["InferenceService"], knative), (["Notebook", "RayCluster"], set())):
        objs = render({"policy": {"adapters": {"builtin": builtin}}})
        granted = {g[1:] for g in _grants(objs) if g[0] == "gpu-reactor-operators"}
        assert {g for g in granted if g[0] == "serving.knative.dev"} == expected, builtin
