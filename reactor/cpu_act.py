"""The act step's CPU part: the CPU facts a decision reads, and the in-place pods/resize writes.

A CPU raise goes to the running pods (`cpu.applyTo: pods`, no restart: Kubernetes 1.33+), to the
owner's template (`template`: every pod is replaced by the rollout), or to both. The pods resized
are the ones the alerts name: the resolver tied each to this workload through its owner chain. After
each resize the pod is read back and the kubelet's verdict (PodResizePending Deferred/Infeasible,
PodResizeInProgress) is reported. Decides nothing; the policy already did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from . import cpu_objects
from .errors import PermanentError
from .kube import KubeGateway, NotFound
from .model import Action, CpuBounds, CpuResources, Signal, Workload
from .policy import CpuFacts
from .resolve import Reader

log = logging.getLogger(__name__)

CPU_ACTION = "resize-cpu"


def cpu_bounds(reader: Reader, namespace: str) -> CpuBounds:
    """The namespace's CPU bounds: LimitRange min/max and every quota's CPU lines."""
    return cpu_objects.to_cpu_bounds(reader.list_objects("LimitRange", namespace),
                                     reader.list_objects("ResourceQuota", namespace))


def cpu_facts(reader: Reader, namespace: str, signal: Signal,
              bounds: Callable[[], CpuBounds] | None = None) -> CpuFacts:
    """Readers, so only a CPU decision pays for them: the namespace's CPU bounds (`bounds`: the engine's, with
    what the notification already reserved), the first named pod's CPU."""

    def running() -> Mapping[str, CpuResources]:
        return cpu_objects.pod_cpu(reader.get("Pod", namespace, signal.pods[0]) if signal.pods else None)

    return CpuFacts(bounds=bounds or (lambda: cpu_bounds(reader, namespace)), pods=running)


def changes_cpu(action: Action, workload: Workload) -> bool:
    """A CPU raise, or the revert of one."""
    if action.action == CPU_ACTION:
        return True
    last = workload.state.last_action
    return action.action == "revert" and last is not None and last.action == CPU_ACTION


def template_cpu(action: Action) -> dict[str, Any]:
    """The pod-spec part of a template patch that sets the container's CPU."""
    assert action.cpu is not None and action.container is not None
    return cpu_objects.resize_body(action.container, action.cpu)["spec"]


def resize_pods(kube: KubeGateway, action: Action, signal: Signal) -> list[str]:
    """pods/resize on every pod the alerts name; "pod: status" for each, as the kubelet reports it.

    A refused resize (quota, LimitRange, QoS change: 403/422) is a PermanentError naming the pod;
    a pod that is gone is skipped (its replacement is created from the template).
    """
    assert action.cpu is not None and action.container is not None
    namespace = action.workload.namespace
    body = cpu_objects.resize_body(action.container, action.cpu)
    report = []
    for pod in signal.pods:
        try:
            kube.resize_pod(namespace, pod, body)
            status = cpu_objects.resize_status(kube.get("Pod", namespace, pod))
        except NotFound:
            report.append(f"{pod}: gone")
            continue
        except PermanentError as e:
            raise PermanentError(f"pod {pod}: resize refused: {e}", status=e.status, reason=e.reason) from e
        report.append(f"{pod}: {status}")
    log.info("pods resized", extra={"workload": str(action.workload), "container": action.container,
                                    "to": action.to_value, "pods": "; ".join(report)})
    return report
