"""The scheduler and the kubelet in one step: bind Pending pods to a Node with room, then run them.

Resources fit against `status.allocatable` minus the requests of the pods already bound. With no
Node objects at all the cluster has unlimited capacity. Never evicts or preempts.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from . import events, quantity, resize
from .admission import pod_usage
from .objects import set_condition, timestamp
from .operations import Api
from .ownership import is_active
from .selectors import match_label_selector

Obj = dict[str, Any]
VIRTUAL_NODE = "sim-node"


def requests_of(pod: Obj) -> dict[str, Fraction]:
    usage = pod_usage(pod)
    out = {k[len("requests."):]: v for k, v in usage.items() if k.startswith("requests.")}
    out["pods"] = Fraction(1)
    return out


def _free(node: Obj, pods: list[Obj]) -> dict[str, Fraction]:
    alloc = (node.get("status") or {}).get("allocatable") or (node.get("status") or {}).get("capacity") or {}
    free = {k: quantity.parse(v) for k, v in alloc.items()}
    for pod in pods:
        if pod.get("spec", {}).get("nodeName") == node["metadata"]["name"] and is_active(pod):
            for key, value in requests_of(pod).items():
                if key in free:
                    free[key] -= value
    return free


def _misfits(node: Obj, pod: Obj, pods: list[Obj]) -> list[str]:
    """Why the pod does not fit the node (empty when it fits)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if not match_label_selector({"matchLabels": selector}, node["metadata"].get("labels") or {}):
        return ["node(s) didn't match Pod's node affinity/selector"]
    free = _free(node, pods)
    out = []
    for key, need in sorted(requests_of(pod).items()):
        if not need:
            continue
        if key in free and free[key] < need:
            out.append("Too many pods" if key == "pods" else f"Insufficient {key}")
        elif key not in free and key not in ("cpu", "memory", "ephemeral-storage"):
            out.append(f"Insufficient {key}")
    return out


def schedule(api: Api) -> None:
    nodes = list(api.store.items("nodes"))
    pods = list(api.store.items("pods"))
    for pod in pods:
        if is_active(pod) and not pod["spec"].get("nodeName"):
            _schedule_one(api, pod, nodes, pods)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for pod in api.store.items("pods"):
        if pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") == "Pending":
            _run(api, pod)
        elif pod.get("status", {}).get("phase") == "Running":
            resize.actuate(api, pod, by_name.get(pod["spec"].get("nodeName", "")), pods)


def _status_resources(container: Obj) -> Obj:
    """What a resize-capable kubelet reports in containerStatuses[*].resources: the container's
    resources as applied (here: as in spec, at once)."""
    return copy.deepcopy(container.get("resources") or {})


def _schedule_one(api: Api, pod: Obj, nodes: list[Obj], pods: list[Obj]) -> None:
    if not nodes:
        pod["spec"]["nodeName"] = VIRTUAL_NODE
        api.store.put("pods", pod)
        return
    reasons: dict[str, int] = {}
    for node in nodes:
        misfits = _misfits(node, pod, pods)
        if not misfits:
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            pods[:] = [p for p in pods if p["metadata"]["uid"] != pod["metadata"]["uid"]] + [pod]
            api.store.put("pods", pod)
            return
        for why in misfits:
            reasons[why] = reasons.get(why, 0) + 1
    detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    message = f"0/{len(nodes)} nodes are available: {detail}."
    _unschedulable(api, pod, message)


def _unschedulable(api: Api, pod: Obj, message: str) -> None:
    now = timestamp(api.clock)
    conds = set_condition(pod["status"].get("conditions") or [], "PodScheduled", "False", "Unschedulable",
                          message, now)
    if conds != (pod["status"].get("conditions") or []):
        pod["status"]["conditions"] = conds
        api.store.put("pods", pod)
    events.record(api, pod, type_="Warning", reason="FailedScheduling", message=message,
                  component="default-scheduler")


def _run(api: Api, pod: Obj) -> None:
    """What the kubelet reports once the containers started: Running and Ready."""
    now = timestamp(api.clock)
    seq = int(pod["metadata"]["uid"][-6:], 16)
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    pod["status"].update({
        "phase": "Running", "conditions": conditions, "hostIP": "10.0.0.1",
        "podIP": f"10.1.{seq // 250 % 250}.{seq % 250 + 1}", "startTime": now,
        "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                               "started": True, "restartCount": 0,
                               "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}",
                               "state": {"running": {"startedAt": now}}, "resources": _status_resources(c)}
                              for c in pod["spec"].get("containers") or []],
    })
    api.store.put("pods", pod)
    api.after_write(api.registry.by_plural("pods"), pod["metadata"]["namespace"])


def finish(api: Api, pod: Obj, exit_code: int) -> Obj:
    """What the kubelet reports when a running pod's containers exit with `exit_code`: restarted in
    place under restartPolicy Always (or OnFailure after a failure), else Succeeded or Failed."""
    if (pod.get("status") or {}).get("phase") != "Running":
        raise ValueError(f"pod {pod['metadata']['name']} is not Running")
    now = timestamp(api.clock)
    policy = pod["spec"].get("restartPolicy", "Always")
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "finishedAt": now}
    for c in pod["status"].get("containerStatuses") or []:
        started = (c.get("state") or {}).get("running", {}).get("startedAt", now)
        ended = {"terminated": {**terminated, "startedAt": started, "containerID": c.get("containerID", "")}}
        if policy == "Always" or (policy == "OnFailure" and exit_code != 0):
            c.update(restartCount=int(c.get("restartCount", 0)) + 1, lastState=ended, state={"running": {"startedAt": now}})
        else:
            c.update(ready=False, started=False, state=ended)
    if policy == "Never" or (policy == "OnFailure" and exit_code == 0):
        pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        reason = "PodCompleted" if exit_code == 0 else "PodFailed"
        conds = pod["status"].get("conditions") or []
        for ctype in ("Ready", "ContainersReady"):
            conds = set_condition(conds, ctype, "False", reason, "", now)
        pod["status"]["conditions"] = conds
    stored = api.store.put("pods", pod)
    api.after_write(api.registry.by_plural("pods"), pod["metadata"]["namespace"])
    return stored
