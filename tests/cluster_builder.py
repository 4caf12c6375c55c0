"""A namespace's world on the embedded cluster, built in one place: its Namespace, GPU Nodes, quotas and workloads
as the dicts `SimCluster.apply` takes, and a started cluster that holds them, settled.

tests/fixtures/cluster.yaml is the world most tests share (the `sim` fixture); a test that needs a world of its
own (a CPU quota, a 16 Ti node, one trainer of 2 GPUs) builds it here instead of writing the manifests again.
A stand-in for another project's object (an operator's child, a CRD) is not built here: it stays as that
project's code builds it, beside the test that needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reactor_sim import SimCluster
from tests.sim.builders import GPU, gpu_node
from tests.support import NAMESPACE

Obj = dict[str, Any]
# The seed's PriorityClasses (low/medium/high-priority-gpu), as deploy/base ships them.
PRIORITY_CLASSES = Path(__file__).resolve().parents[1] / "deploy" / "base" / "priorityclasses.yaml"
TRAINER_IMAGE = "registry.example.com/trainer:3"

__all__ = ["GPU", "NAMESPACE", "PRIORITY_CLASSES", "Obj", "container", "deployment", "gpu_node", "limit_range",
           "namespace", "quota", "start"]


def namespace(name: str = NAMESPACE) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def container(*, image: str = TRAINER_IMAGE, gpus: int | str | None = 1, cpu: str | None = None,
              memory: str | None = None, resize: dict[str, str] | None = None, name: str = "main") -> Obj:
    """One container asking for (and limited to) the same amounts; `resize`: resource → its resizePolicy's
    restartPolicy, in that order (an empty dict writes an empty resizePolicy)."""
    amounts = {key: str(value) for key, value in ((GPU, gpus), ("cpu", cpu), ("memory", memory)) if value is not None}
    out: Obj = {"name": name, "image": image}
    if resize is not None:
        out["resizePolicy"] = [{"resourceName": r, "restartPolicy": p} for r, p in resize.items()]
    out["resources"] = {"limits": dict(amounts), "requests": dict(amounts)}
    return out


def deployment(name: str = "trainer", *containers: Obj, replicas: int = 1, priority: str | None = None,
               labelled: bool = False, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               ns: str = NAMESPACE) -> Obj:
    """A Deployment whose pods are labelled `app: <name>` (its selector); `labelled` labels the Deployment so too,
    `labels` (else) with those; `annotations` (even empty) are written as given."""
    metadata: Obj = {"name": name, "namespace": ns}
    if labelled or labels is not None:
        metadata["labels"] = {"app": name} if labelled else labels
    if annotations is not None:
        metadata["annotations"] = annotations
    pod: Obj = {"containers": list(containers) or [container()]}
    if priority:
        pod["priorityClassName"] = priority
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}}


def quota(name: str, hard: dict[str, int | str], *, priority: str | None = None, ns: str = NAMESPACE) -> Obj:
    """A ResourceQuota; `priority` scopes it to the pods of that PriorityClass (scopeSelector, operator In)."""
    spec: Obj = {"hard": {key: str(value) for key, value in hard.items()}}
    if priority:
        spec["scopeSelector"] = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                       "values": [priority]}]}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def limit_range(name: str, *limits: Obj, ns: str = NAMESPACE) -> Obj:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
            "spec": {"limits": list(limits)}}


def start(*objects: Obj | Iterable[Obj], priority_classes: bool = False, settle: bool = True,
          **cluster: Any) -> SimCluster:
    """A started cluster (`cluster`: SimCluster's arguments, e.g. kube_version) holding `objects`, settled unless
    told not to: the pods of its workloads exist and are Running. Stop it (or use it in a `with`)."""
    sim = SimCluster(**cluster).start()
    try:
        if priority_classes:
            sim.load_manifests(PRIORITY_CLASSES)
        sim.apply([o for item in objects for o in ([item] if isinstance(item, dict) else item)])
        if settle:
            sim.settle()
    except BaseException:
        sim.stop()
        raise
    return sim
