"""The embedded cluster at scale: incremental quota usage equals a full recount, the owner indexes and the
scheduler's first-fit shortcut give the answers a full scan gives, and a large cluster settles."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench.sim_scale import build, quotas_match_recount
from reactor_sim import SimCluster
from reactor_sim.admission import quota_used, recount
from reactor_sim.quantity import render
from tests.sim.builders import GPU, deployment, gpu_node, pod

KEYS = {f"requests.{GPU}": "1000", f"limits.{GPU}": "1000", "pods": "1000", "count/pods": "1000"}


def _quota(name: str, ns: str, hard: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": dict(hard or KEYS), **spec}}


def _random_pod(rng: random.Random, name: str, ns: str) -> dict[str, Any]:
    body = pod(name, ns, gpus=rng.choice([None, 1, 2, 4]))
    if rng.random() < 0.5:
        body["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})["cpu"] = \
            rng.choice(["100m", "1", "2500m"])
        body["spec"]["containers"][0]["resources"].setdefault("limits", {})["cpu"] = "4"
    if rng.random() < 0.3:
        body["spec"]["priorityClassName"] = "burst"
    return body


def _step(sim: SimCluster, rng: random.Random, live: list[tuple[str, str]], n: int) -> None:
    """One random operation: create, finish (Succeeded: no longer counted), relabel, or delete a pod."""
    choice = rng.random()
    if choice < 0.5 or not live:
        ns = rng.choice(["ml", "other"])
        sim.apply(_random_pod(rng, f"p{n}", ns))
        live.append((ns, f"p{n}"))
    elif choice < 0.65:
        ns, name = rng.choice(live)
        if sim.get("pods", ns, name)["status"].get("phase") == "Running":
            sim.finish_pod(ns, name, exit_code=rng.choice([0, 1]))
    elif choice < 0.8:
        ns, name = rng.choice(live)
        body = sim.get("pods", ns, name)
        body["metadata"].setdefault("labels", {})["n"] = str(n)
        sim.apply(body)
    else:
        ns, name = live.pop(rng.randrange(len(live)))
        sim.delete("pods", ns, name)


def test_incremental_quota_usage_equals_a_full_recount_after_random_operations() -> None:
    """The resource-quota controller's status.used, kept incrementally on each pod write, equals a recount over
    every pod of the namespace after a seeded random mix of creates, runs, completions, updates and deletes,
    for unscoped and scoped quotas (PriorityClass, BestEffort, NotBestEffort) and a quota changed midway."""
    rng = random.Random(14)
    with SimCluster() as sim:
        sim.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("ml", "other")])
        sim.apply([{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "burst"},
                    "value": 10}, gpu_node("n1", gpus=64), gpu_node("n2", gpus=64)])
        burst = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["burst"]}]}
        sim.apply([_quota("all", "ml"), _quota("all", "other"),
                   _quota("best-effort", "ml", {"pods": "1000"}, scopes=["BestEffort"]),
                   _quota("burst", "ml", {"pods": "1000", f"requests.{GPU}": "1000"}, scopeSelector=burst)])
        live: list[tuple[str, str]] = []
        for n in range(160):
            _step(sim, rng, live, n)
            if n % 7 == 0:
                sim.settle()
            if n == 80:
                hard = {"pods": "900", f"requests.{GPU}": "900"}
                sim.apply(_quota("best-effort", "ml", hard, scopes=["NotBestEffort"]))
        sim.settle()
        quotas = sim.list("resourcequotas")
        with sim.store.lock:
            for quota in quotas:
                hard = quota["spec"]["hard"]
                full = {k: render(v) for k, v in recount(sim.store, quota).items()}
                assert quota_used(sim.store, sim.api.plurals(), quota) == full
                assert quota["status"]["used"] == full, quota["metadata"]
                assert set(full) == set(hard)
        assert any(q["status"]["used"][f"requests.{GPU}"] != "0" for q in quotas)
        assert quotas_match_recount(sim)


def test_first_fit_places_like_a_full_scan_and_reports_every_node_when_nothing_fits() -> None:
    """Identical pods start their search where the previous one fit; the placement is still first fit in node
    order, and a pod that fits nowhere still gets FitError's histogram over all nodes."""
    with SimCluster() as sim:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        sim.apply([gpu_node("a", gpus=2), gpu_node("b", gpus=3), gpu_node("c", gpus=1)])
        sim.apply([pod(f"p{i}", gpus=1) for i in range(7)] + [pod("big", gpus=2)])
        sim.settle()
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in sim.list("pods", "ml")}
        assert nodes == {"big": "a", "p0": "b", "p1": "b", "p2": "b", "p3": "c", "p4": None, "p5": None, "p6": None}
        messages = {e["message"] for e in sim.list("events", "ml") if e["reason"] == "FailedScheduling"}
        assert messages == {"0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}


def test_deleting_a_deployment_removes_its_replicasets_and_pods_through_the_owner_index() -> None:
    with SimCluster() as sim:
        sim.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, gpu_node()])
        sim.apply([deployment("a", replicas=2), deployment("b", replicas=2)])
        sim.settle()
        sim.delete("deployments", "ml", "a")
        sim.settle()
        assert sorted(p["metadata"]["labels"]["app"] for p in sim.list("pods", "ml")) == ["b", "b"]
        assert [rs["metadata"]["name"].rsplit("-", 1)[0] for rs in sim.list("replicasets", "ml")] == ["b"]


def test_the_watch_history_needs_room_for_one_change() -> None:
    with pytest.raises(ValueError, match="at least one change"):
        SimCluster(watch_history=0)


@pytest.mark.slow
def test_a_large_cluster_settles_with_every_pod_running_and_quotas_equal_to_the_recount() -> None:
    """3,000 one-GPU pods of 30 Deployments in 5 namespaces, each under a GPU quota (the bench measures 10,000)."""
    with SimCluster() as sim:
        build(sim, pods=3000, deployments=30, namespaces=5)
        pods = sim.store.view("pods")
        assert len(pods) == 3000 and all(p["status"].get("phase") == "Running" for p in pods)
        assert all(d["status"].get("readyReplicas") == 100 for d in sim.store.view("deployments"))
        assert quotas_match_recount(sim)
        used = {q["metadata"]["namespace"]: q["status"]["used"][f"requests.{GPU}"] for q in sim.list("resourcequotas")}
        assert used == {f"scale-{i}": "600" for i in range(5)}
