"""The ReplicaSet controller: keep `spec.replicas` pods named `<rs>-<5 chars>`, created through admission.

A denied create leaves a `FailedCreate` Warning Event and a `ReplicaFailure` condition on the
ReplicaSet; pods already running are never touched because of it.
"""

from __future__ import annotations

from typing import Any

from reactor_sim import events
from reactor_sim.objects import drop_condition, set_condition, timestamp
from reactor_sim.operations import Api
from reactor_sim.ownership import controlled_by, is_active, is_available, is_ready, pod_from_template
from reactor_sim.status import ApiError

Obj = dict[str, Any]


def sync_all(api: Api) -> None:
    for rs in api.store.items("replicasets"):
        sync(api, rs)


def owned_pods(api: Api, owner: Obj) -> list[Obj]:
    """The owner's active pods as stored (read only), through the store's owner index."""
    return [p for _, p in api.store.dependents(owner["metadata"]["uid"], "pods")
            if controlled_by(p, owner) and is_active(p)]


def sync(api: Api, rs: Obj) -> None:
    pods = owned_pods(api, rs)
    want = int(rs["spec"].get("replicas", 1))
    failure: str | None = None
    for _ in range(max(0, want - len(pods))):
        failure = _create_pod(api, rs)
        if failure:
            break
    if len(pods) > want:
        _delete_excess(api, pods, len(pods) - want)
    _write_status(api, rs, failure)


def _create_pod(api: Api, rs: Obj) -> str | None:
    pod = pod_from_template(rs["spec"]["template"], rs, rs["metadata"]["namespace"])
    pod["metadata"]["generateName"] = rs["metadata"]["name"] + "-"
    try:
        api.create(api.registry.by_plural("pods"), rs["metadata"]["namespace"], pod)
    except ApiError as e:
        events.record(api, rs, type_="Warning", reason="FailedCreate", message=f"Error creating: {e.message}",
                      component="replicaset-controller")
        return e.message
    return None


def _delete_excess(api: Api, pods: list[Obj], count: int) -> None:
    """Delete not-ready pods first, then the newest (uids are handed out in creation order)."""
    victims = sorted(pods, key=lambda p: (is_ready(p), -int(p["metadata"]["uid"][-12:], 16)))[:count]
    for pod in victims:
        api.delete(api.registry.by_plural("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"])


def _conditions(api: Api, old: list[Obj], failure: str | None, complete: bool) -> list[Obj]:
    """ReplicaFailure set on a denied create (a repeat differing only in the pod name is the same)."""
    if failure:
        before = next((c for c in old if c.get("type") == "ReplicaFailure"), None)
        if before and events._same(before.get("message", ""), failure):
            return old
        return set_condition(old, "ReplicaFailure", "True", "FailedCreate", failure, timestamp(api.clock))
    return drop_condition(old, "ReplicaFailure") if complete else old


def _write_status(api: Api, rs: Obj, failure: str | None) -> None:
    current = api.store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"])
    if current is None:
        return
    pods = owned_pods(api, current)
    ready = sum(1 for p in pods if is_ready(p))
    now, min_ready = api.clock(), int(current["spec"].get("minReadySeconds", 0))
    available = sum(1 for p in pods if is_available(p, min_ready, now))
    complete = len(pods) >= int(current["spec"].get("replicas", 1))
    conds = _conditions(api, current.get("status", {}).get("conditions") or [], failure, complete)
    status = {"replicas": len(pods), "fullyLabeledReplicas": len(pods), "readyReplicas": ready,
              "availableReplicas": available, "observedGeneration": current["metadata"].get("generation", 1)}
    if conds:
        status["conditions"] = conds
    if current.get("status") != status:
        current["status"] = status
        api.controller_write("replicasets", current, adopt=True)
