"""Scoped ResourceQuotas, pinned to kube-apiserver's pod quota evaluator (pkg/quota/v1/evaluator/core/pods.go
`podMatchesScopeFunc`), the generic `Matches` (every scope requirement must match; `spec.scopes` are `Exists`
requirements), the ResourceQuota admission plugin (only matching quotas constrain a pod) and
ValidateResourceQuota (`validateResourceQuotaScopes`, `validateScopedResourceSelectorRequirement`)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from reactor_sim import SimCluster
from tests.sim.builders import GPU, pod
from tests.sim.helpers import status_of

KEY = f"requests.{GPU}"


def _classes(sim: SimCluster, *names: str, default: str | None = None) -> None:
    for i, name in enumerate(names):
        sim.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                   "value": 1000 * (i + 1), "globalDefault": name == default})


def _quota(sim: SimCluster, name: str, hard: dict[str, str], *, scopes: list[str] | None = None,
           exprs: list[dict[str, Any]] | None = None) -> None:
    spec: dict[str, Any] = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if exprs:
        spec["scopeSelector"] = {"matchExpressions": exprs}
    meta = {"name": name, "namespace": "ml"}
    sim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": spec})


def _class_pod(name: str, cls: str | None, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    body = pod(name, gpus=gpus, **spec)
    if cls:
        body["spec"]["priorityClassName"] = cls
    return body


def _used(core: k8s.CoreV1Api, name: str) -> dict[str, str]:
    return core.read_namespaced_resource_quota(name, "ml").status.used


@pytest.mark.parametrize(
    ("operator", "values", "tracked"),
    [
        ("In", ["high"], {"high"}),
        ("NotIn", ["high"], {"medium", None}),
        ("Exists", None, {"high", "medium"}),
        ("DoesNotExist", None, {None}),
    ],
    ids=["in", "notin-matches-no-class", "exists", "does-not-exist"],
)
def test_priority_class_scope_selector_counts_only_matching_pods(sim: SimCluster, core: k8s.CoreV1Api,
                                                                   operator: str, values: list[str] | None,
                                                                   tracked: set[str | None]) -> None:
    """podMatchesScopeFunc, PriorityClass: a label selector over {PriorityClass: <pod's class>}; a pod without a
    class has no such label, so NotIn and DoesNotExist match it, In and Exists do not."""
    _classes(sim, "medium", "high")
    _quota(sim, "scoped", {KEY: "10", "pods": "10"},
           exprs=[{"scopeName": "PriorityClass", "operator": operator, **({"values": values} if values else {})}])
    gpus = {"high": 1, "medium": 2, None: 4}
    for cls, n in gpus.items():
        core.create_namespaced_pod("ml", _class_pod(f"p-{cls or 'none'}", cls, gpus=n))
    assert _used(core, "scoped") == {KEY: str(sum(gpus[c] for c in tracked)), "pods": str(len(tracked))}


def test_admission_ignores_a_quota_whose_scope_excludes_the_pod(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """ResourceQuota admission checks only the quotas that Match the pod: a burst-class quota of 0 GPUs does not
    stop a pod without a class (the issue's case (b)), and stops a burst pod with the upstream message."""
    _classes(sim, "burst")
    _quota(sim, "burst-gpu", {KEY: "0"}, exprs=[{"scopeName": "PriorityClass", "operator": "In", "values": ["burst"]}])
    core.create_namespaced_pod("ml", _class_pod("plain", None, gpus=2))
    status = status_of(lambda: core.create_namespaced_pod("ml", _class_pod("b", "burst")), 403)
    assert status["message"] == ('pods "b" is forbidden: exceeded quota: burst-gpu, requested: '
                                 f"{KEY}=1, used: {KEY}=0, limited: {KEY}=0")
    assert _used(core, "burst-gpu") == {KEY: "0"}


def test_a_pod_must_fit_every_quota_that_matches_it(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Admission charges a pod to every matching quota: an unscoped quota with room does not let a pod past
    a full quota scoped to its class."""
    _classes(sim, "high")
    _quota(sim, "all-gpu", {KEY: "16"})
    _quota(sim, "high-gpu", {KEY: "2"}, exprs=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}])
    for i in range(2):
        core.create_namespaced_pod("ml", _class_pod(f"h{i}", "high"))
    status = status_of(lambda: core.create_namespaced_pod("ml", _class_pod("h2", "high")), 403)
    assert "exceeded quota: high-gpu" in status["message"]
    core.create_namespaced_pod("ml", _class_pod("plain", None))
    assert (_used(core, "all-gpu"), _used(core, "high-gpu")) == ({KEY: "3"}, {KEY: "2"})


def test_the_global_default_class_is_what_a_scope_sees(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """Priority admission runs before ResourceQuota: a pod without priorityClassName gets the globalDefault
    class, and a quota scoped to that class tracks it."""
    _classes(sim, "medium", default="medium")
    _quota(sim, "medium-gpu", {KEY: "1"},
           exprs=[{"scopeName": "PriorityClass", "operator": "In", "values": ["medium"]}])
    core.create_namespaced_pod("ml", _class_pod("a", None))
    assert _used(core, "medium-gpu") == {KEY: "1"}
    assert "exceeded quota: medium-gpu" in status_of(lambda: core.create_namespaced_pod("ml", _class_pod("b", None)),
                                                     403)["message"]


def test_best_effort_scopes_follow_the_pods_qos_class(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """isBestEffort is GetPodQOS == BestEffort: only cpu and memory count, so a pod asking for GPUs alone is
    BestEffort; one with a cpu request is not."""
    _quota(sim, "be", {"pods": "5"}, scopes=["BestEffort"])
    _quota(sim, "not-be", {"pods": "5", KEY: "5"}, scopes=["NotBestEffort"])
    core.create_namespaced_pod("ml", pod("gpu-only", gpus=1))
    burstable = pod("burstable", gpus=2)
    burstable["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    core.create_namespaced_pod("ml", burstable)
    assert _used(core, "be") == {"pods": "1"}
    assert _used(core, "not-be") == {"pods": "1", KEY: "2"}


def test_terminating_scopes_follow_active_deadline_seconds(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """isTerminating: spec.activeDeadlineSeconds set and >= 0."""
    _quota(sim, "term", {KEY: "5"}, scopes=["Terminating"])
    _quota(sim, "long", {KEY: "5"}, scopes=["NotTerminating"])
    core.create_namespaced_pod("ml", pod("batch", gpus=1, activeDeadlineSeconds=600))
    core.create_namespaced_pod("ml", pod("serve", gpus=3))
    assert (_used(core, "term"), _used(core, "long")) == ({KEY: "1"}, {KEY: "3"})


def test_scopes_and_selector_must_all_match(sim: SimCluster, core: k8s.CoreV1Api) -> None:
    """getScopeSelectorsFromQuota: spec.scopes become Exists requirements beside the scopeSelector's, ANDed."""
    _classes(sim, "high")
    _quota(sim, "high-batch", {KEY: "5"}, scopes=["Terminating"],
           exprs=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}])
    core.create_namespaced_pod("ml", _class_pod("high-serve", "high", gpus=1))
    core.create_namespaced_pod("ml", _class_pod("high-batch", "high", gpus=2, activeDeadlineSeconds=60))
    core.create_namespaced_pod("ml", _class_pod("plain-batch", None, gpus=4, activeDeadlineSeconds=60))
    assert _used(core, "high-batch") == {KEY: "2"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"hard": {"requests.cpu": "1"}, "scopes": ["BestEffort"]}, "spec.scopes: Invalid value: "),
        ({"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]}, "conflicting scopes"),
        ({"hard": {"pods": "1"}, "scopes": ["Gold"]}, "unsupported scope"),
        ({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In"}]}},
         "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` "
         "is 'In' or 'NotIn' for scope selector"),
        ({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "BestEffort", "operator": "DoesNotExist"}]}},
         "spec.scopeSelector.matchExpressions.operator: Invalid value: \"DoesNotExist\": must be 'Exist' when"),
        ({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "Exists", "values": ["a"]}]}},
         "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"),
    ],
    ids=["best-effort-caps-only-pods", "conflicting", "unknown-scope", "in-needs-values", "state-scope-exists-only",
         "exists-takes-no-values"],
)
def test_invalid_scopes_are_422(core: k8s.CoreV1Api, spec: dict[str, Any], message: str) -> None:
    """ValidateResourceQuota refuses scopes it cannot apply: 422 Invalid, nothing stored."""
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": spec}
    status = status_of(lambda: core.create_namespaced_resource_quota("ml", body), 422)
    assert status["message"].startswith('ResourceQuota "q" is invalid: ') and message in status["message"]
    assert core.list_namespaced_resource_quota("ml").items == []


def test_extended_resources_may_be_capped_under_any_scope(core: k8s.CoreV1Api) -> None:
    """IsResourceQuotaScopeValidForResource is checked for standard quota names only: requests.nvidia.com/gpu
    under a PriorityClass selector (how GPU clusters cap each class) is valid."""
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "high-gpu"},
            "spec": {"hard": {KEY: "2"}, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}
    assert core.create_namespaced_resource_quota("ml", body).spec.scope_selector.match_expressions[0].values == ["high"]
