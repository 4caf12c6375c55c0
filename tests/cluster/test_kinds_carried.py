"""kinds.not_carried: an operator's child must show the reactor's last change before its rollout can verify it.

The child here is the StatefulSet Kubeflow's notebook controller runs a Notebook as: kubeflow/notebooks v1.11.0
notebook-controller generateStatefulSet copies the Notebook's `spec.template.spec` whole into the StatefulSet's pod
template (named as the Notebook, no labels of its own). Until the controller reconciles, the StatefulSet's own
rollout is of the old template, and verifying on it would verify a change no pod runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reactor.cluster.kinds import not_carried
from reactor.core.model import ComputeResources, Container, LastAction, ReactorState, Workload, WorkloadRef

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"
GI = 1 << 30


def _notebook(*, cpu: ComputeResources | None, memory: ComputeResources | None, last: LastAction) -> Workload:
    """The Notebook as the reactor reads it (its own template), after its last change."""
    return Workload(ref=WorkloadRef("Notebook", "ml", "jupyter"), resource_version="7",
                    containers=(Container("jupyter", 1, cpu=cpu, memory=memory),),
                    state=ReactorState(last_action=last))


def _statefulset(resources: dict[str, Any]) -> dict[str, Any]:
    """The child as generateStatefulSet builds it, with the container's resources as last reconciled."""
    return {"kind": "StatefulSet", "metadata": {"name": "jupyter", "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": [{"name": "jupyter", "image": "jupyter:1",
                                                           "resources": resources}]}}}}


def _raise(action: str, to: str) -> LastAction:
    return LastAction(action=action, direction="up", container="jupyter", from_value=None, to_value=to,
                      fingerprint="fp", starts_at="2025-03-01T11:00:00Z", time=datetime(2025, 3, 1, 12, tzinfo=UTC))


CPU_3 = ComputeResources(3000, 3000)
MEM_12 = ComputeResources(12 * GI, 12 * GI)


@pytest.mark.parametrize(("action", "to", "child", "why"), [
    ("resize-cpu", "3000m", {"limits": {"cpu": "2", GPU: "1"}, "requests": {"cpu": "2", GPU: "1"}},
     "the operator has not carried the change to StatefulSet jupyter yet (jupyter: cpu limit 2)"),
    ("resize-cpu", "3000m", {"limits": {GPU: "1"}},
     "the operator has not carried the change to StatefulSet jupyter yet (jupyter: cpu limit none)"),
    ("resize-cpu", "3000m", {"limits": {"cpu": "3", GPU: "1"}, "requests": {"cpu": "3", GPU: "1"}}, ""),
    ("resize-memory", "12288Mi", {"limits": {"memory": "8Gi"}},
     "the operator has not carried the change to StatefulSet jupyter yet (jupyter: memory limit 8Gi)"),
    ("resize-memory", "12288Mi", {"limits": {"memory": "12Gi"}}, ""),
], ids=["cpu-not-yet", "cpu-unset-in-child", "cpu-carried", "memory-not-yet", "memory-carried"])
def test_a_cpu_or_memory_raise_in_the_template_must_reach_the_child(action: str, to: str, child: dict[str, Any],
                                                                   why: str) -> None:
    notebook = _notebook(cpu=CPU_3, memory=MEM_12, last=_raise(action, to))
    assert not_carried(notebook, _statefulset(child), GPU) == why


def test_a_raise_made_in_place_only_is_not_the_operator_s_to_carry() -> None:
    """`cpu.applyTo: pods`: the running pods were resized, the Notebook's template still asks 2 cores, and so does
    the StatefulSet's: nothing is waiting for the operator."""
    notebook = _notebook(cpu=ComputeResources(2000, 2000), memory=None, last=_raise("resize-cpu", "3000m"))
    assert not_carried(notebook, _statefulset({"limits": {"cpu": "2"}}), GPU) == ""


def test_a_gpu_change_is_still_compared() -> None:
    last = LastAction(action="resize-gpu", direction="up", container="jupyter", from_value=1, to_value=2,
                      fingerprint="fp", starts_at="2025-03-01T11:00:00Z", time=datetime(2025, 3, 1, 12, tzinfo=UTC))
    notebook = _notebook(cpu=None, memory=None, last=last)
    assert not_carried(notebook, _statefulset({"limits": {GPU: "1"}}), GPU) == (
        "the operator has not carried the change to StatefulSet jupyter yet (jupyter: 1 GPUs)")
    assert not_carried(notebook, _statefulset({"limits": {GPU: "2"}}), GPU) == ""
