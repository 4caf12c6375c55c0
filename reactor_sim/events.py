"""Core v1 Events as the controllers record them on the objects they manage.

An event that says the same thing again is not rewritten, so `settle()` can reach a fixed point
(real clusters aggregate repeats into a count instead). Writes go through the store directly.
"""

from __future__ import annotations

import re
from typing import Any

from reactor_sim.objects import timestamp
from reactor_sim.operations import Api

Obj = dict[str, Any]
_GENERATED_POD = re.compile(r'pods "[^"]+"')


def _same(a: str, b: str) -> bool:
    return _GENERATED_POD.sub('pods ""', a) == _GENERATED_POD.sub('pods ""', b)


def record(api: Api, obj: Obj, *, type_: str, reason: str, message: str, component: str) -> None:
    meta = obj["metadata"]
    ns = meta.get("namespace") or "default"
    for ev in api.store.view("events", ns):
        inv = ev.get("involvedObject") or {}
        if inv.get("uid") == meta["uid"] and ev.get("reason") == reason and _same(ev.get("message", ""), message):
            return
    now = timestamp(api.clock)
    event: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{api.store.resource_version + 1:016x}", "namespace": ns},
        "involvedObject": {"kind": obj["kind"], "namespace": meta.get("namespace"), "name": meta["name"],
                           "uid": meta["uid"], "apiVersion": obj["apiVersion"],
                           "resourceVersion": meta.get("resourceVersion")},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "source": {"component": component}, "firstTimestamp": now, "lastTimestamp": now,
        "reportingComponent": component, "reportingInstance": "",
    }
    event["metadata"].update(uid=api.store.next_uid(), creationTimestamp=now)
    api.store.adopt("events", event)
