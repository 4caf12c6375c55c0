"""The node lifecycle controller's taint work: condition taints on Nodes, and NoExecute evictions of pods.

Upstream: doNoScheduleTaintingPass (pkg/controller/nodelifecycle) keeps one NoSchedule taint per bad
condition (Ready False -> not-ready, Unknown -> unreachable, pressures) and for spec.unschedulable; the
NoExecute taint manager deletes the pods that do not tolerate a NoExecute taint of their node (Event
TaintManagerEviction). A Node whose kubelet never posted a Ready condition keeps the not-ready taint it
was admitted with (upstream's kubelet posts one at registration; the 60 s startup grace is not modelled).
"""

from __future__ import annotations

from typing import Any

from reactor_sim import events, taints
from reactor_sim.objects import timestamp
from reactor_sim.operations import Api
from reactor_sim.ownership import is_active

Obj = dict[str, Any]
COMPONENT = "taint-controller"


def sync_all(api: Api) -> None:
    """doNoScheduleTaintingPass for every Node that has reported, then the NoExecute evictions."""
    now = timestamp(api.clock)
    nodes = {}
    for node in api.store.items("nodes"):
        wanted = taints.reconcile(node, now) if taints.has_reported(node) else None
        if wanted is not None:
            node["spec"]["taints"] = wanted
            if not wanted:
                del node["spec"]["taints"]
            node = api.store.put("nodes", node)
        nodes[node["metadata"]["name"]] = node
    no_execute = [t for n in nodes.values() for t in (n.get("spec") or {}).get("taints") or []
                  if t.get("effect") == taints.NO_EXECUTE]
    if no_execute:
        evict(api, nodes)


def evict(api: Api, nodes: dict[str, Obj]) -> None:
    """Delete every active pod whose node has a NoExecute taint it does not tolerate (or no longer does)."""
    for pod in api.store.view("pods"):
        node = nodes.get(pod["spec"].get("nodeName", ""))
        if node is None or not is_active(pod):
            continue
        node_taints = (node.get("spec") or {}).get("taints") or []
        if taints.eviction_due(node_taints, pod["spec"].get("tolerations") or [], api.clock()):
            meta = pod["metadata"]
            events.record(api, pod, type_="Normal", reason="TaintManagerEviction",
                          message=f"Marking for deletion Pod {meta['namespace']}/{meta['name']}", component=COMPONENT)
            api.delete(api.registry.by_plural("pods"), meta["namespace"], meta["name"])
