"""The scheduler and the kubelet in one step: bind Pending pods to a Node that fits, then run them.

Filters in the default profile's order: NodeUnschedulable, TaintToleration (NoSchedule and NoExecute),
node selector, then resources against `status.allocatable` minus the requests of the pods already bound.
With no Node that fits, or no Node at all, a pod stays Pending with a FailedScheduling Event. Never
evicts or preempts (NoExecute evictions belong to nodelifecycle).
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from reactor_sim import events, quantity, resize, taints
from reactor_sim.admission import pod_usage
from reactor_sim.objects import set_condition, timestamp
from reactor_sim.operations import Api
from reactor_sim.ownership import is_active
from reactor_sim.selectors import match_label_selector
from reactor_sim.store import clone

Obj = dict[str, Any]
NO_NODES = "no nodes available to schedule pods"  # ErrNoNodesAvailable


def requests_of(pod: Obj) -> dict[str, Fraction]:
    usage = pod_usage(pod)
    out = {k[len("requests."):]: v for k, v in usage.items() if k.startswith("requests.")}
    out["pods"] = Fraction(1)
    return out


def _free_by_node(nodes: list[Obj], pods: list[Obj]) -> dict[str, dict[str, Fraction]]:
    """Each node's allocatable minus the requests of the active pods bound to it (computed once a round;
    binding takes from it, so a round costs pods + pending x nodes, not pending x nodes x pods)."""
    free = {}
    for node in nodes:
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        free[node["metadata"]["name"]] = {k: quantity.parse(v) for k, v in alloc.items()}
    for pod in pods:
        room = free.get(pod.get("spec", {}).get("nodeName") or "")
        if room is not None and is_active(pod):
            _take(room, requests_of(pod))
    return free


def _take(room: dict[str, Fraction], needs: dict[str, Fraction]) -> None:
    for key, value in needs.items():
        if key in room:
            room[key] -= value


def _misfits(node: Obj, pod: Obj, needs: dict[str, Fraction], free: dict[str, Fraction]) -> list[str]:
    """Why the pod does not fit the node (empty when it fits): the first failing filter's reasons."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not taints.tolerates_unschedulable(tolerations):
        return ["node(s) were unschedulable"]
    taint = taints.untolerated((node.get("spec") or {}).get("taints") or [], tolerations)
    if taint is not None:
        return [taints.describe(taint)]
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if not match_label_selector({"matchLabels": selector}, node["metadata"].get("labels") or {}):
        return ["node(s) didn't match Pod's node affinity/selector"]
    out = []
    for key, need in sorted(needs.items()):
        if not need:
            continue
        if key in free and free[key] < need:
            out.append("Too many pods" if key == "pods" else f"Insufficient {key}")
        elif key not in free and key not in ("cpu", "memory", "ephemeral-storage"):
            out.append(f"Insufficient {key}")
    return out


def schedule(api: Api) -> None:
    """Read the stored pods and nodes without copying; copy only the pods it writes."""
    pods = api.store.view("pods")
    nodes = api.store.view("nodes")
    pending = [p for p in pods if is_active(p) and not p["spec"].get("nodeName")]
    if pending:
        free = _free_by_node(nodes, pods)
        first_fit: dict[str, int] = {}
        for pod in pending:
            _schedule_one(api, clone(pod), nodes, free, first_fit)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for pod in api.store.view("pods"):
        if pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") == "Pending":
            _run(api, clone(pod))
        elif pod.get("status", {}).get("phase") == "Running" and api.registry.version.serves_resize \
                and (_resize_pending(pod) or resize.reported(pod)):
            step = resize.actuate if api.registry.version.resize_conditions else resize.actuate_legacy
            step(api, clone(pod), by_name.get(pod["spec"].get("nodeName", "")), pods)


def _status_resources(container: Obj) -> Obj:
    """What a resize-capable kubelet reports in containerStatuses[*].resources: the container's
    resources as applied (here: as in spec, at once)."""
    return clone(container.get("resources") or {})


def _resize_pending(pod: Obj) -> bool:
    specs = {c["name"]: c.get("resources") or {} for c in pod["spec"].get("containers") or []}
    return any(s.get("name") in specs and "running" in (s.get("state") or {})
               and s.get("resources") != specs[s["name"]] for s in pod["status"].get("containerStatuses") or [])


def _fit_key(pod: Obj, needs: dict[str, Fraction]) -> str:
    """Pods with the same needs, tolerations and node selector fit the same nodes."""
    spec = pod.get("spec") or {}
    return json.dumps([sorted((k, str(v)) for k, v in needs.items()), spec.get("tolerations"),
                       spec.get("nodeSelector")], sort_keys=True)


def _schedule_one(api: Api, pod: Obj, nodes: list[Obj], free: dict[str, dict[str, Fraction]],
                  first_fit: dict[str, int]) -> None:
    """First fit in node order. Free room only shrinks within a round, so a pod like one placed before
    starts where that one fit: the nodes before it did not fit then and do not now (same answer, fewer scans)."""
    if not nodes:
        _unschedulable(api, pod, NO_NODES)
        return
    needs = requests_of(pod)
    key = _fit_key(pod, needs)
    for index in range(first_fit.get(key, 0), len(nodes)):
        node = nodes[index]
        room = free[node["metadata"]["name"]]
        if not _misfits(node, pod, needs, room):
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            _take(room, needs)
            first_fit[key] = index
            api.store.adopt("pods", pod)
            return
    reasons: dict[str, int] = {}
    for node in nodes:  # no node fits: every node's reasons, for the FitError histogram
        for why in _misfits(node, pod, needs, free[node["metadata"]["name"]]):
            reasons[why] = reasons.get(why, 0) + 1
    detail = ", ".join(sorted(f"{n} {why}" for why, n in reasons.items()))  # FitError.Error's histogram
    _unschedulable(api, pod, f"0/{len(nodes)} nodes are available: {detail}.")


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
    """What the kubelet reports once the containers started: Running and Ready. Per release (versions.py):
    `PodReadyToStartContainers` from 1.29 (its gate's beta), `containerStatuses[].resources` only where in-place
    resize is on (1.33+: the kubelet reports it and dropDisabledPodStatusFields keeps it only with the gate)."""
    now = timestamp(api.clock)
    seq = int(pod["metadata"]["uid"][-6:], 16)
    version = api.registry.version
    kinds = ("PodReadyToStartContainers",) if version.minor >= 29 else ()
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                  for t in (*kinds, "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    resized = version.serves_resize
    pod["status"].update({
        "phase": "Running", "conditions": conditions, "hostIP": "10.0.0.1",
        "podIP": f"10.1.{seq // 250 % 250}.{seq % 250 + 1}", "startTime": now,
        "podIPs": [{"ip": f"10.1.{seq // 250 % 250}.{seq % 250 + 1}"}],  # as the kubelet reports both
        "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                               "started": True, "restartCount": 0,
                               "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}",
                               "state": {"running": {"startedAt": now}},
                               **({"resources": _status_resources(c)} if resized else {})}
                              for c in pod["spec"].get("containers") or []],
    })
    api.store.adopt("pods", pod)
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
            c.update(restartCount=int(c.get("restartCount", 0)) + 1, lastState=ended,
                     state={"running": {"startedAt": now}})
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
