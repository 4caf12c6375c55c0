"""The StatefulSet controller: pods `<sts>-0..N-1` created in order (OrderedReady), a template change
replaces them highest ordinal first (honouring `partition`), scale down removes the highest ordinal.
`spec.ordinals.start` shifts the range to `start..start+N-1` (kubernetes pkg/controller/statefulset
stateful_set_utils.go getStartOrdinal/getEndOrdinal: a pod outside the range is condemned); a LeaderWorkerSet's
worker StatefulSets start at 1.

One step per round, as the real controller does one pod at a time.
"""

from __future__ import annotations

from typing import Any

from reactor_sim import events
from reactor_sim.operations import Api
from reactor_sim.ownership import controlled_by, is_active, is_available, is_ready, pod_from_template, template_hash
from reactor_sim.status import ApiError

Obj = dict[str, Any]
REVISION_LABEL = "controller-revision-hash"


def sync_all(api: Api) -> None:
    for sts in api.store.items("statefulsets"):
        sync(api, sts)


def revision(sts: Obj) -> str:
    return f"{sts['metadata']['name']}-{template_hash(sts['spec']['template'])}"


def _pods(api: Api, sts: Obj) -> dict[int, Obj]:
    out: dict[int, Obj] = {}
    prefix = sts["metadata"]["name"] + "-"
    for _, pod in api.store.dependents(sts["metadata"]["uid"], "pods"):
        suffix = pod["metadata"]["name"][len(prefix):]
        if controlled_by(pod, sts) and is_active(pod) and suffix.isdigit():
            out[int(suffix)] = pod
    return out


def sync(api: Api, sts: Obj) -> None:
    _step(api, sts, _pods(api, sts))
    _write_status(api, sts)


def _step(api: Api, sts: Obj, pods: dict[int, Obj]) -> None:
    replicas, update = int(sts["spec"].get("replicas", 1)), revision(sts)
    start = int((sts["spec"].get("ordinals") or {}).get("start") or 0)
    end = start + replicas  # one past the last ordinal
    pods_api = api.registry.by_plural("pods")
    parallel = sts["spec"].get("podManagementPolicy") == "Parallel"
    for ordinal in sorted(pods, reverse=True):
        if ordinal >= end or ordinal < start:
            api.delete(pods_api, sts["metadata"]["namespace"], pods[ordinal]["metadata"]["name"])
            if not parallel:
                return
    for ordinal in range(start, end):
        if ordinal not in pods:
            _create(api, sts, ordinal, update)
            if not parallel:
                return
        elif not is_ready(pods[ordinal]) and not parallel:
            return
    if (sts["spec"].get("updateStrategy") or {}).get("type") == "OnDelete":
        return
    partition = int(((sts["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition", 0))
    for ordinal in range(end - 1, max(partition, start) - 1, -1):
        if ordinal not in pods:  # Parallel: created this round, with the update revision already
            continue
        if pods[ordinal]["metadata"].get("labels", {}).get(REVISION_LABEL) != update:
            api.delete(pods_api, sts["metadata"]["namespace"], pods[ordinal]["metadata"]["name"])
            return


def _create(api: Api, sts: Obj, ordinal: int, update: str) -> None:
    name = f"{sts['metadata']['name']}-{ordinal}"
    pod = pod_from_template(sts["spec"]["template"], sts, sts["metadata"]["namespace"])
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"].update({REVISION_LABEL: update, "statefulset.kubernetes.io/pod-name": name,
                                      "apps.kubernetes.io/pod-index": str(ordinal)})
    pod["spec"].setdefault("hostname", name)
    if sts["spec"].get("serviceName"):
        pod["spec"].setdefault("subdomain", sts["spec"]["serviceName"])
    try:
        api.create(api.registry.by_plural("pods"), sts["metadata"]["namespace"], pod)
    except ApiError as e:
        events.record(api, sts, type_="Warning", reason="FailedCreate",
                      message=f"create Pod {name} in StatefulSet {sts['metadata']['name']} failed error: {e.message}",
                      component="statefulset-controller")
    else:
        events.record(api, sts, type_="Normal", reason="SuccessfulCreate",
                      message=f"create Pod {name} in StatefulSet {sts['metadata']['name']} successful",
                      component="statefulset-controller")


def _write_status(api: Api, sts: Obj) -> None:
    current = api.store.get("statefulsets", sts["metadata"]["namespace"], sts["metadata"]["name"])
    if current is None:
        return
    pods = list(_pods(api, current).values())
    update = revision(current)
    old = current.get("status") or {}
    updated = sum(1 for p in pods if p["metadata"]["labels"].get(REVISION_LABEL) == update)
    replicas = int(current["spec"].get("replicas", 1))
    current_rev = old.get("currentRevision") or update
    if updated == replicas == len(pods):
        current_rev = update
    ready = sum(1 for p in pods if is_ready(p))
    now, min_ready = api.clock(), int(current["spec"].get("minReadySeconds", 0))
    available = sum(1 for p in pods if is_available(p, min_ready, now))
    status = {"observedGeneration": current["metadata"].get("generation", 1), "replicas": len(pods),
              "readyReplicas": ready, "availableReplicas": available,
              "currentReplicas": sum(1 for p in pods if p["metadata"]["labels"].get(REVISION_LABEL) == current_rev),
              "updatedReplicas": updated, "currentRevision": current_rev, "updateRevision": update,
              "collisionCount": 0}
    if old != status:
        current["status"] = status
        api.controller_write("statefulsets", current)
