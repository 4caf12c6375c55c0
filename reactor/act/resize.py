"""The act step's CPU part (and memory's): the facts a decision reads, and the in-place pods/resize writes.

A CPU or memory raise goes to the running pods (`cpu.applyTo: pods`, no restart: Kubernetes 1.33+), to the
owner's template (`template`: every pod is replaced by the rollout), or to both; a memory raise on a container
whose resizePolicy restarts it for memory goes to the template only (the Action's `apply_to`). The pods resized
are the ones the alerts name: the resolver tied each to this workload through its owner chain. After
each resize the pod is read back and the kubelet's verdict (PodResizePending Deferred/Infeasible,
PodResizeInProgress; `status.resize` before 1.33) is reported. Where the server serves no pods/resize the policy
has refused (or sent `both` to the template alone) before anything is written; a 404 met here anyway is said
as such, never read as a pod gone. Decides nothing; the policy already did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from reactor.cluster import compute
from reactor.cluster.compute import CPU_ACTION, MEMORY_ACTION
from reactor.cluster.kube import KubeGateway, NotFound
from reactor.core.errors import PermanentError
from reactor.core.model import Action, ComputeBounds, Signal, Workload
from reactor.policy import ComputeFacts
from reactor.resolve.owners import Reader

log = logging.getLogger(__name__)

RESOURCE = {CPU_ACTION: "cpu", MEMORY_ACTION: "memory"}  # the resource each in-place action resizes


def cpu_bounds(reader: Reader, namespace: str) -> ComputeBounds:
    """The namespace's CPU bounds: LimitRange min/max and every quota's CPU lines."""
    return compute.to_compute_bounds(reader.list_objects("LimitRange", namespace),
                                     reader.list_objects("ResourceQuota", namespace))


def memory_bounds(reader: Reader, namespace: str) -> ComputeBounds:
    """The namespace's memory bounds (bytes): LimitRange min/max/maxLimitRequestRatio and every quota's lines."""
    return compute.to_compute_bounds(reader.list_objects("LimitRange", namespace),
                                     reader.list_objects("ResourceQuota", namespace), "memory")


def compute_facts(reader: Reader, namespace: str, signal: Signal,
              bounds: Callable[[], ComputeBounds] | None = None,
              memory: Callable[[], ComputeBounds] | None = None) -> ComputeFacts:
    """Readers, so only a CPU or memory decision pays for them: the namespace's CPU and memory bounds
    (`bounds`, `memory`: the engine's, with what the notification already reserved), the first named pod's
    CPU, memory and memory resizePolicy (the pod is read once), and whether the server resizes running pods
    (its discovery, remembered by the gateway)."""
    pod: dict[str, Any] = {}

    def first() -> Mapping[str, Any] | None:
        if signal.pods and "pod" not in pod:
            pod["pod"] = reader.get("Pod", namespace, signal.pods[0])
        return pod.get("pod")

    return ComputeFacts(bounds=bounds or (lambda: cpu_bounds(reader, namespace)),
                    pods=lambda: compute.pod_compute(first()),
                    memory_bounds=memory or (lambda: memory_bounds(reader, namespace)),
                    pod_memory=lambda: compute.pod_compute(first(), "memory"),
                    memory_restarts=lambda: compute.restarts_on_resize(first(), "memory"),
                    in_place_refusal=lambda: reader.kube.capabilities().in_place_refusal())


def changes_compute(action: Action, workload: Workload) -> bool:
    """A CPU or memory raise, or the revert of one."""
    if action.action in RESOURCE:
        return True
    last = workload.state.last_action
    return action.action == "revert" and last is not None and last.action in RESOURCE


def resize_pods(kube: KubeGateway, action: Action, signal: Signal, *, only: bool = True) -> list[str]:
    """pods/resize on every pod the alerts name; "pod: status" for each, as the kubelet reports it.

    A refused resize (quota, LimitRange, QoS change: 403/422) is a PermanentError naming the pod; a pod that
    is gone is skipped (its replacement is created from the template). A 404 is "gone" only when the pod is:
    the pod still there means the server serves no pods/resize (older than 1.33, or the gate off), which is
    a PermanentError saying so (and the capabilities are asked again), never a pod gone. A resize whose
    answer does not carry the values sent changed nothing ("unchanged"). When the change goes only to the
    pods (`only`) and no pod was resized, nothing changed: a PermanentError, never an applied change.
    """
    assert action.container is not None
    namespace = action.workload.namespace
    resource, value = compute.compute_of(action)
    body = compute.resize_body(action.container, value, resource)
    report = []
    resized = 0
    for pod in signal.pods:
        try:
            written = kube.resize_pod(namespace, pod, body)
        except NotFound as e:
            if not _exists(kube, namespace, pod):
                report.append(f"{pod}: gone")
                continue
            kube.forget_capabilities()
            raise PermanentError(f"pod {pod}: the API server serves no pods/resize ({e}): nothing was resized in "
                                 "place", status=404, reason="NotFound") from e
        except PermanentError as e:
            raise PermanentError(f"pod {pod}: resize refused: {e}", status=e.status, reason=e.reason) from e
        if not compute.carries(written, action.container, value, resource):
            report.append(f"{pod}: unchanged")
            continue
        resized += 1
        try:
            report.append(f"{pod}: {compute.resize_status(kube.get('Pod', namespace, pod))}")
        except NotFound:
            report.append(f"{pod}: gone")
    log.info("pods resized", extra={"workload": str(action.workload), "container": action.container,
                                    "resource": resource, "to": action.to_value, "pods": "; ".join(report)})
    if only and not resized:
        raise PermanentError(f"in-place resize changed no pod: {'; '.join(report) or 'no pod named'}")
    return report


def _exists(kube: KubeGateway, namespace: str, pod: str) -> bool:
    try:
        kube.get("Pod", namespace, pod)
    except NotFound:
        return False
    return True
