"""The trust boundary, against a real `reactor serve`: what a hostile tenant tries, and what it gets (nothing).

The embedded cluster runs in RBAC mode; the tenant acts with its own token and a tenant's Role (get/patch
Deployments, create Pods in its namespace), through the official client. It forges the reactor's state
annotations on its Deployments (an `original` off the ladder, past replicas.max, past gpus.max and the
LimitRange; a `last-action` in year 9999; an edited value under a genuine MAC; a genuine record copied
from another Deployment) and forges owner references to another team's Deployment. Every attempt is
counted as tried, and as acted on when the cluster shows any write to its target. One notification
naming 300 pods that do not exist is counted in API requests. Figures: FIGURES.trust.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client as k8s

from reactor.state.annotations import LAST_ACTION, ORIGINAL
from reactor.tools.payloads import AlertSpec, fingerprint, notification, rfc3339
from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import Child, deployment_doc, namespace_docs, pods_of, seed
from tests.trust.tenant import ghost_specs

NS = "ml-workloads"
TENANT, TENANT_TOKEN = "team-b@example.com", "team-b-token"
RBAC = "rbac.authorization.k8s.io"
STARTED = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
POLICY = {"namespaces": {"allow": [NS]}, "revert": ["set-priority-up", "scale-replicas-up", "resize-gpu-up"],
          "revertAfter": "0s", "alerts": {"GPUSaturated": ["set-priority-up"]}}
FORGED = ("priority-off-ladder", "replicas-past-max", "gpus-past-max", "year-9999", "edited-under-mac", "copied")
# Issue 23: the reactor's own older records put back, and its records removed. The state ledger is the Lease the
# shipped policy names; no cooldown or holds, so one Deployment sees boost, revert and boost again.
REPLAYED, REMOVED = ("replayed-boost", "replayed-revert"), ("removed-boost", "removed-revert")
LEDGER_POLICY = {"namespaces": {"allow": [NS]}, "cooldown": "0s", "reverseAfter": "0s", "revertAfter": "0s",
                 "revert": ["scale-replicas-up"], "alerts": {"GPUSaturated": ["scale-replicas-up"]},
                 "verify": {"leaseNamespace": "gpu-reactor"}, "state": {"ledgerName": "gpu-reactor-state"},
                 "budget": {"global": {"actions": 100, "per": "10m"}, "namespace": {"actions": 100, "per": "10m"}}}
RECORD = ("gpu-reactor.io/last-action", "gpu-reactor.io/cooldown-until", "gpu-reactor.io/original",
          "gpu-reactor.io/verification", "gpu-reactor.io/state-mac")


def _docs() -> list[dict[str, Any]]:
    docs = namespace_docs(NS) + [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("medium-priority-gpu", 1000), ("high-priority-gpu", 2000))]
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-reactor"}})
    for name in (*REPLAYED, *REMOVED):
        docs.append(deployment_doc(NS, name, replicas=2, annotations={"gpu-reactor.io/mode": "enforce"}))
    for name in ("victim", *FORGED):
        doc = deployment_doc(NS, name, annotations={"gpu-reactor.io/mode": "enforce"})
        doc["spec"]["template"]["spec"]["priorityClassName"] = "medium-priority-gpu"
        docs.append(doc)
    docs += [{"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": "tenant", "namespace": NS},
              "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "patch"]},
                        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]}]},
             {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": "tenant", "namespace": NS},
              "subjects": [{"kind": "User", "apiGroup": RBAC, "name": TENANT}],
              "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "tenant"}}]
    return docs


@pytest.fixture
def rbac_cluster() -> Iterator[SimCluster]:
    sim = SimCluster(rbac=True).start()
    try:
        seed(sim, _docs())
        sim.add_token(TENANT_TOKEN, user=TENANT)
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def tenant(rbac_cluster: SimCluster) -> Iterator[k8s.AppsV1Api]:
    config = k8s.Configuration(host=rbac_cluster.url)
    config.api_key, config.api_key_prefix = {"BearerToken": TENANT_TOKEN}, {"BearerToken": "Bearer"}
    with k8s.ApiClient(config) as api:
        yield api


def _spec(sim: SimCluster, name: str, status: str = "firing", alert: str = "GPUSaturated") -> AlertSpec:
    return AlertSpec(alert, NS, pods_of(sim, NS, name)[0], "main", 0.99, 4, status=status, starts_at=STARTED)


def _last(spec: AlertSpec, action: str, *, container: str | None = None, time: str | None = None) -> str:
    return json.dumps({"action": action, "direction": "up", "container": container, "from": None, "to": None,
                       "alert": spec.name, "fingerprint": fingerprint(spec.labels()), "startsAt": rfc3339(STARTED),
                       "time": time or rfc3339(STARTED + timedelta(minutes=1))})


def _generation(sim: SimCluster, name: str) -> int:
    return int(sim.get("deployments", NS, name)["metadata"]["generation"])


def _forge_state(sim: SimCluster, apps: k8s.AppsV1Api, child: Child) -> int:
    """Each forgery, then the alert that would act on it; returns how many were acted on."""
    def patch(name: str, annotations: dict[str, str]) -> None:
        apps.patch_namespaced_deployment(name, NS, {"metadata": {"annotations": annotations}})

    genuine = _spec(sim, "edited-under-mac")
    assert child.post(notification([genuine])).outcomes[0]["result"] == "applied"  # the one expected write
    sim.settle()
    record = sim.get("deployments", NS, "edited-under-mac")["metadata"]["annotations"]
    forgeries: dict[str, tuple[dict[str, str], AlertSpec]] = {
        "priority-off-ladder": ({LAST_ACTION: _last(_spec(sim, "priority-off-ladder"), "set-priority"),
                                 ORIGINAL: json.dumps({"priorityClassName": "system-cluster-critical"})},
                                _spec(sim, "priority-off-ladder", "resolved")),
        "replicas-past-max": ({LAST_ACTION: _last(_spec(sim, "replicas-past-max"), "scale-replicas"),
                               ORIGINAL: json.dumps({"replicas": 40})}, _spec(sim, "replicas-past-max", "resolved")),
        "gpus-past-max": ({LAST_ACTION: _last(_spec(sim, "gpus-past-max"), "resize-gpu", container="main"),
                           ORIGINAL: json.dumps({"gpus": {"main": 12}})}, _spec(sim, "gpus-past-max", "resolved")),
        "year-9999": ({LAST_ACTION: _last(_spec(sim, "year-9999"), "set-priority", time="9999-12-31T23:59:59Z")},
                      _spec(sim, "year-9999", alert="GPUSaturated")),
        "edited-under-mac": ({ORIGINAL: json.dumps({"priorityClassName": "system-cluster-critical"})},
                             _spec(sim, "edited-under-mac", "resolved")),
        "copied": ({k: v for k, v in record.items() if k.startswith("gpu-reactor.io/") and k != "gpu-reactor.io/mode"},
                   _spec(sim, "copied", "resolved")),
    }
    before = {name: _generation(sim, name) for name in forgeries}
    for name, (forged, spec) in forgeries.items():
        patch(name, forged)
        answer = child.post(notification([spec]))
        assert answer.status == 200, answer.body
    return sum(_generation(sim, name) != before[name] for name in forgeries)


def _forge_owners(sim: SimCluster, api: k8s.ApiClient, child: Child) -> tuple[int, int]:
    victim = sim.get("deployments", NS, "victim")
    (rs,) = [r for r in sim.list("replicasets", NS) if r["metadata"]["name"].startswith("victim-")]
    labels = dict(rs["spec"]["template"]["metadata"]["labels"])
    refs = [("Deployment", victim["metadata"]["uid"], {"app": "victim"}),
            ("ReplicaSet", "00000000-forged", labels), ("ReplicaSet", rs["metadata"]["uid"], {"app": "team-b"}),
            ("ReplicaSet", victim["metadata"]["uid"], labels)]
    before = _generation(sim, "victim")
    for i, (kind, uid, pod_labels) in enumerate(refs):
        name = victim["metadata"]["name"] if kind == "Deployment" else rs["metadata"]["name"]
        owner = {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}
        k8s.CoreV1Api(api).create_namespaced_pod(NS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"team-b-{i}", "namespace": NS, "labels": pod_labels, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "main", "image": "registry.example.com/b:1"}]}})
        spec = AlertSpec("GPUSaturated", NS, f"team-b-{i}", "main", 0.99, 4)
        assert child.post(notification([spec])).status == 200
    return len(refs), int(_generation(sim, "victim") != before)


def test_a_tenant_gets_nothing_it_could_not_do_itself(rbac_cluster: SimCluster, tenant: k8s.ApiClient,
                                                      spawn: Callable[..., Child]) -> None:
    sim = rbac_cluster
    child = spawn(sim, policy=POLICY)
    acted = _forge_state(sim, k8s.AppsV1Api(tenant), child)
    tried_owners, acted_owners = _forge_owners(sim, tenant, child)
    sim.reset_counters()
    ghosts = child.post(notification(ghost_specs()))
    ghost_requests = sum(sim.requests.values())
    assert ghosts.status == 200
    FIGURES.count_trust(forgeries_tried=len(FORGED), forgeries_acted=acted, forged_owners_tried=tried_owners,
                        forged_owners_acted=acted_owners, ghost_requests=ghost_requests)
    FIGURES.add("trust", deliveries=2 + len(FORGED) + tried_owners, applied=1, expected=1)
    assert (acted, acted_owners) == (0, 0)
    assert ghost_requests <= 21


def _step(sim: SimCluster) -> None:
    """Let the rollout finish and the second turn (a cooldown of 0s still ends at the next whole second)."""
    sim.settle()
    time.sleep(1.1)


def _saved(apps: k8s.AppsV1Api, name: str) -> dict[str, str | None]:
    annotations = apps.read_namespaced_deployment(name, NS).metadata.annotations or {}
    return {k: annotations.get(k) for k in RECORD}


def _replay(sim: SimCluster, apps: k8s.AppsV1Api, child: Child, name: str) -> bool:
    """Boost 2 → 3 (record R1), revert (R2), boost again (R3), then R1 or R2 put back and the alert resolved: True
    when the reactor honoured the replay — anything but the revert of R3 from its own copy (3 → 2) in the state
    ledger (the replayed revert R2 kept the boost; the older records were once refused, freezing the workload)."""
    pod, first = pods_of(sim, NS, name)[0], STARTED
    spec = AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, starts_at=first)
    first_answer = child.post(notification([spec])).outcomes[0]
    assert first_answer["result"] == "applied", first_answer
    saved = _saved(apps, name)  # R1
    _step(sim)
    resolved = AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, status="resolved", starts_at=first)
    assert child.post(notification([resolved])).outcomes[0].get("action") == "revert"
    if name == "replayed-revert":
        saved = _saved(apps, name)  # R2
    _step(sim)
    later = first + timedelta(minutes=10)
    again = child.post(notification([AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, starts_at=later)]))
    assert again.outcomes[0]["result"] == "applied", [(o.get("reason"), o.get("detail")) for o in again.outcomes]
    _step(sim)
    apps.patch_namespaced_deployment(name, NS, {"metadata": {"annotations": saved}})
    before = _generation(sim, name)
    answer = child.post(notification([AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, status="resolved",
                                                starts_at=later)]))
    reverted = (answer.outcomes[0].get("action"), answer.outcomes[0].get("from"), answer.outcomes[0].get("to"))
    return reverted != ("revert", 3, 2) or _replicas(sim, name) != 2 or _generation(sim, name) != before + 1


def _remove(sim: SimCluster, apps: k8s.AppsV1Api, child: Child, name: str) -> bool:
    """Boost 2 → 3, the record deleted, then the same alert firing again (removed-boost) or resolving
    (removed-revert): True when the reactor took it as a fresh start — a boost that no longer records the original 2
    (it forgot its own copy of the record), or a resolve that did not revert 3 → 2."""
    pod = pods_of(sim, NS, name)[0]
    spec = AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, starts_at=STARTED)
    assert child.post(notification([spec])).outcomes[0]["result"] == "applied"
    _step(sim)
    apps.patch_namespaced_deployment(name, NS, {"metadata": {"annotations": dict.fromkeys(RECORD)}})
    before = _generation(sim, name)
    status, starts = ("firing", STARTED + timedelta(minutes=5)) if name == "removed-boost" else ("resolved", STARTED)
    answer = child.post(notification([AlertSpec("GPUSaturated", NS, pod, "main", 0.99, 4, status=status,
                                                starts_at=starts)]))
    assert _generation(sim, name) == before + 1, answer.outcomes
    if name == "removed-boost":
        written = sim.get("deployments", NS, name)["metadata"]["annotations"]
        return json.loads(written.get(ORIGINAL) or "{}") != {"replicas": 2}
    return (answer.outcomes[0].get("action"), _replicas(sim, name)) != ("revert", 2)


def _replicas(sim: SimCluster, name: str) -> int:
    return int(sim.get("deployments", NS, name)["spec"]["replicas"])


def test_the_reactors_own_older_records_and_removed_ones_are_refused(rbac_cluster: SimCluster,
                                                                    tenant: k8s.ApiClient,
                                                                    spawn: Callable[..., Child]) -> None:
    sim = rbac_cluster
    child = spawn(sim, policy=LEDGER_POLICY)
    apps = k8s.AppsV1Api(tenant)
    honoured = sum(_replay(sim, apps, child, name) for name in REPLAYED)
    reset = sum(_remove(sim, apps, child, name) for name in REMOVED)
    FIGURES.count_trust(replays_tried=len(REPLAYED), replays_honoured=honoured, deletions_tried=len(REMOVED),
                        deletions_reset=reset)
    FIGURES.add("trust", deliveries=4 * len(REPLAYED) + 2 * len(REMOVED),
                applied=3 * len(REPLAYED) + len(REMOVED), expected=3 * len(REPLAYED) + len(REMOVED))
    assert (honoured, reset) == (0, 0)
