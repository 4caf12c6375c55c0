"""Workloads owned by an operator's resource: read through its adapter, written as a JSON merge patch.

A custom resource takes no strategic merge patch, and a merge patch replaces a list whole: the
write carries the whole subtree it changes (the container list, all worker groups) as read, with
only the reactor's change in it, and stays conditional on the resourceVersion of that read, so a
concurrent edit is a 409 and a re-read, never lost. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactor.cluster.compute import CPU_ACTION, MEMORY_ACTION, compute_of, resize_body
from reactor.cluster.workloads import ANNOTATION_PREFIX, max_surge, pod_shape, to_containers
from reactor.core.errors import ReactorError
from reactor.core.model import (
    Action,
    Container,
    OperatorFacts,
    PodShape,
    Skip,
    SkipReason,
    SurgePods,
    Workload,
    WorkloadRef,
)
from reactor.integrations.adapters import Adapter, Part
from reactor.integrations.adapters.base import Path, read, written
from reactor.state.annotations import read_state

Obj = Mapping[str, Any]


def adapted_workload(adapter: Adapter, obj: Obj, part_name: str, gpu_resource: str, *,
                     child: Obj | None = None, via: WorkloadRef | None = None) -> Workload | None:
    """The workload one part of the resource describes; None when the resource has no such part."""
    part = adapter.part(obj, part_name)
    if part is None:
        return None
    meta = obj.get("metadata") or {}
    pod_spec = read(obj, part.spec_path) or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(ANNOTATION_PREFIX)}
    replicas = part.replicas_in(obj)
    # More running than the resource says (KServe's HPA or KEDA above minReplicas): quota counts what runs, and the
    # resource's count is not the reactor's to scale.
    running, scale_why = adapter.running(obj, part, child)
    replicas = running if running is not None and (replicas is None or running > replicas) else replicas
    generation = int(meta.get("generation", 0))
    child_surge = max_surge(child.get("spec") or {}, replicas) if child and child.get("kind") == "Deployment" else 0
    surge = adapter.surge(obj, part.default_replicas if replicas is None else replicas, child=child,
                          child_surge=child_surge)
    beside = _surge_pods(obj, adapter.surge_beside(obj, part, surge), gpu_resource)
    label_surge = _surge_pods(obj, adapter.label_beside(obj, part, surge, child=child), gpu_resource)
    facts = OperatorFacts(part=part.name, rollout=adapter.part_rollout(obj, part.name, child),
                          refusals={**adapter.refusals(obj, part, gpu_resource),
                                    **({"scale-replicas": scale_why} if scale_why else {})},
                          pods_per_replica=part.pods,
                          replica_gpus=_replica_gpus(adapter, obj, part, gpu_resource),
                          recommend_only=adapter.recommend_only(), surge_beside=beside, label_surge=label_surge,
                          replica_beside=_surge_pods(obj, _scaled_with(adapter, obj, part), gpu_resource),
                          effect=adapter.effect(obj))
    return Workload(
        ref=WorkloadRef(adapter.kind, str(meta.get("namespace", "")), str(meta.get("name", ""))),
        resource_version=str(meta.get("resourceVersion", "")),
        containers=_containers(obj, part, pod_spec, gpu_resource), priority_class=pod_spec.get("priorityClassName"),
        init_containers=to_containers(pod_spec.get("initContainers"), gpu_resource),  # as a Deployment's
        replicas=replicas,
        generation=generation, observed_generation=generation, max_surge=surge * part.pods,
        state=read_state(annotations), via=via, annotations=annotations, uid=str(meta.get("uid", "")), operator=facts,
        pods=_shape(obj, part, pod_spec),
    )


def _surge_pods(obj: Obj, started: tuple[tuple[Part, int], ...], gpu_resource: str) -> tuple[SurgePods, ...]:
    """The other templates' pods a change starts, each template's GPUs and pods with its own PriorityClass and pod
    shape (its pods' whole CPU and memory among it): a quota scoped to a class counts a pod by the pod's own spec
    (podMatchesScopeFunc), so the leader of an LWS group or a RayService's head may fall in quotas the changed
    template's pods do not."""
    out = []
    for other, count in started:
        spec = read(obj, other.spec_path) or {}
        pods = count * other.pods
        gpus = pods * sum(c.gpus for c in _containers(obj, other, spec, gpu_resource))
        shape = _shape(obj, other, spec)
        # A template without GPUs still takes CPU and memory quota (a Ray head): kept where it sets either.
        if pods > 0 and (gpus > 0 or shape.cpu is not None or shape.memory is not None):
            cls = spec.get("priorityClassName")
            out.append(SurgePods(gpus, cls if isinstance(cls, str) and cls else None, shape, other.name, pods))
    return tuple(out)


def _shape(obj: Obj, part: Part, pod_spec: Obj) -> PodShape:
    """What quota scopes see of the part's pods (`pod_shape`), the container the operator builds from a spec of its
    own (KServe's `predictor.model`) counted with the others."""
    model = read(obj, part.model[1]) if part.model is not None else None
    if not isinstance(model, Mapping):
        return pod_shape(pod_spec)
    return pod_shape({**pod_spec, "containers": [*(pod_spec.get("containers") or []), model]})


def _scaled_with(adapter: Adapter, obj: Obj, part: Part) -> tuple[tuple[Part, int], ...]:
    """The other templates one replica of `part` is made of too (a LeaderWorkerSet group's leaderTemplate beside its
    workers), once each: the parts with the same replica count and another template."""
    if part.replicas_path is None:
        return ()
    found: dict[Path, Part] = {}
    for other in adapter.parts(obj):
        if other.replicas_path == part.replicas_path and other.spec_path != part.spec_path:
            found.setdefault(other.spec_path, other)
    return tuple((other, 1) for other in found.values())


def _replica_gpus(adapter: Adapter, obj: Obj, part: Part, gpu_resource: str) -> int:
    """GPUs one more replica takes: every template of the parts scaled together (a LeaderWorkerSet group is its
    leader and its workers), each counted once, times its pods."""
    total, seen = 0, set()
    for other in adapter.parts(obj):
        if other.replicas_path != part.replicas_path or other.spec_path in seen:
            continue
        seen.add(other.spec_path)
        spec = read(obj, other.spec_path) or {}
        total += other.pods * sum(c.gpus for c in _containers(obj, other, spec, gpu_resource))
    return total


def _containers(obj: Obj, part: Part, pod_spec: Obj, gpu_resource: str) -> tuple[Container, ...]:
    """The part's containers with their GPUs, CPU and memory as the template sets them (as a built-in kind's are
    read: the quota check charges a surge pod's every container), KServe's `model` first where it is apart."""
    found = list(to_containers(pod_spec.get("containers"), gpu_resource))
    model = read(obj, part.model[1]) if part.model is not None else None
    if part.model is not None and isinstance(model, Mapping) and all(c.name != part.model[0] for c in found):
        found[:0] = to_containers([{**model, "name": part.model[0]}], gpu_resource)
    return tuple(found)


def adapted_patch(adapter: Adapter, obj: Obj, workload: Workload, field: str, action: Action,
                  annotations: Mapping[str, str | None], gpu_resource: str,
                  cpu_apply_to: str = "pods") -> dict[str, Any]:
    """The JSON merge patch that sets `action`'s desired state on the part and records it. A CPU or memory change
    that goes to the running pods only (`cpu_apply_to` "pods": resized in place) records it and changes nothing
    else, as a built-in kind's template patch does."""
    part = adapter.part(obj, workload.part)
    if part is None:
        raise ReactorError(f"{workload.ref} has no template {workload.part!r} any more")
    record = {"metadata": {"resourceVersion": workload.resource_version, "annotations": dict(annotations)}}
    if field in (CPU_ACTION, MEMORY_ACTION) and cpu_apply_to == "pods":
        return record
    changes = _changes(part, field, action, gpu_resource, obj)
    top = str(next(iter(changes))[1])  # the spec field whose subtree the patch carries whole
    if any(len(p) < 2 or p[0] != "spec" or p[1] != top for p in changes):
        raise ReactorError(f"cannot build a patch for {action.action!r} on {workload.ref}: paths outside spec.{top}")
    new = written(obj, changes)
    return {**record, "spec": {top: new["spec"][top]}}


def _changes(part: Part, field: str, action: Action, gpu_resource: str, obj: Obj) -> dict[Path, Callable[[Any], Any]]:
    if field == "scale-replicas":
        if part.replicas_path is None:
            raise ReactorError(f"{action.workload} has no replica count to scale")
        count = int(action.to_value)  # type: ignore[arg-type]
        out: dict[Path, Callable[[Any], Any]] = {part.replicas_path: lambda _: count}
        if part.max_replicas_path is not None and isinstance(read(obj, part.max_replicas_path), int):
            out[part.max_replicas_path] = lambda old: max(int(old), count)
        return out
    if field == "set-priority":
        return {(*part.spec_path, "priorityClassName"): lambda _: action.to_value}
    if field == "resize-gpu" and part.model is not None and action.container == part.model[0] \
            and isinstance(read(obj, part.model[1]), Mapping):
        return {(*part.model[1], "resources"): lambda old: _gpu_resources(old, action, gpu_resource)}
    if field == "resize-gpu":
        return {(*part.spec_path, "containers"): lambda old: _resized(old, action, gpu_resource)}
    if field in (CPU_ACTION, MEMORY_ACTION) and part.model is not None and action.container == part.model[0] \
            and isinstance(read(obj, part.model[1]), Mapping):
        return {(*part.model[1], "resources"): lambda old: _compute_resources(old, action)}
    if field in (CPU_ACTION, MEMORY_ACTION):
        return {(*part.spec_path, "containers"): lambda old: _in_container(old, action, _compute_resources)}
    raise ReactorError(f"cannot build a patch for action {action.action!r} on {action.workload}")


def _resized(containers: Any, action: Action, gpu_resource: str) -> list[Any]:
    """The whole container list as read, the named container's GPU request and limit set together."""
    return _in_container(containers, action, lambda resources, a: _gpu_resources(resources, a, gpu_resource))


def _in_container(containers: Any, action: Action, resources: Callable[[Any, Action], dict[str, Any]]) -> list[Any]:
    """The whole container list as read (a merge patch replaces a list whole), the named container's resources
    as `resources` makes them."""
    out = [dict(c) for c in containers or []]
    target = next((c for c in out if c.get("name") == action.container), None)
    if target is None:
        raise ReactorError(f"container {action.container!r} is gone from {action.workload}")
    target["resources"] = resources(target.get("resources"), action)
    return out


def _compute_resources(resources: Any, action: Action) -> dict[str, Any]:
    """The resources with the CPU (or memory) request and limit the action sets, the rest as read."""
    resource, value = compute_of(action)
    wanted = resize_body(str(action.container), value, resource)["spec"]["containers"][0]["resources"]
    out = dict(resources or {})
    for kind, values in wanted.items():
        out[kind] = {**(out.get(kind) or {}), **values}
    return out


def _gpu_resources(resources: Any, action: Action, gpu_resource: str) -> dict[str, Any]:
    """The resources with the GPU request and limit set together (an extended resource needs both equal)."""
    count = str(action.to_value)
    out = dict(resources or {})
    out["limits"] = {**(out.get("limits") or {}), gpu_resource: count}
    out["requests"] = {**(out.get("requests") or {}), gpu_resource: count}
    return out


def adapted_refusal(adapter: Adapter, owner: Any) -> Skip | None:
    """An operator's resource the pod's template cannot be found in (a vanished pod of a multi-template kind)."""
    if adapter.part(owner.obj, owner.part) is not None:
        return None
    return Skip(SkipReason.UNSUPPORTED_OWNER,
                f"{owner.ref.kind} {owner.ref.name} has no pod template named {owner.part!r} for this pod")
