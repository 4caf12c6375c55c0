"""Quantities the old parser could not read, end to end against the embedded cluster (issue 26): a `2Ti` memory
limit is a limit (not "no memory limit"), a `limits.memory: 2Ti` quota line bounds the raise (not silently
dropped), and a GPU count written `1e0` (valid Kubernetes: quantity.go ParseQuantity, a DecimalExponent) is one
GPU, not an internal error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.core.quantity import value
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests import cluster_builder as build
from tests.support import NAMESPACE, Reactor, reactor_for

TI = 1 << 40


def big_memory(hard: str) -> list[build.Obj]:
    """One trainer pod limited to 2 Ti, under a memory quota whose limits.memory line is `hard`."""
    return [build.quota("memory", {"requests.memory": "8Ti", "limits.memory": hard}),
            build.deployment("trainer", build.container(gpus=1, cpu="2", memory="2Ti"), labelled=True)]


# A GPU count in exponent form, as a person may write it.
EXPONENT_GPU = build.deployment("trainer", build.container(gpus="1e0"), labelled=True)


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster().start() as cluster:
        yield cluster


def _load(sim: SimCluster, *objects: build.Obj) -> None:
    """Into the namespace, beside one 8-GPU node of 16 Ti."""
    sim.apply([build.namespace(), build.gpu_node(memory="16Ti"), *objects])
    sim.settle()


def _outcomes(r: Reactor, alert: str, value_: float) -> list[dict[str, Any]]:
    specs = [AlertSpec(alert, NAMESPACE, pod, "main", value_, 1) for pod in r.pods("trainer")]
    answer = r.post(notification(specs))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return list(answer.get_json()["outcomes"])


def test_a_2ti_memory_limit_is_raised_within_a_2ti_scale_quota_line(sim: SimCluster, token_file: Path) -> None:
    _load(sim, *big_memory("3Ti"))
    r = reactor_for(sim, token_file, memory={"max": "4Ti"})
    (outcome,) = _outcomes(r, "GPUContainerNearMemoryLimit", 0.95)
    assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == \
        ("applied", "resize-memory", "2097152Mi", "2621440Mi")  # 2Ti × 1.25 = 2.5Ti, within limits.memory 3Ti
    sim.settle()
    (pod,) = sim.list("pods", NAMESPACE, label_selector="app=trainer")
    assert value(pod["spec"]["containers"][0]["resources"]["limits"]["memory"]) == 2 * TI + TI // 2


def test_a_2ti_quota_line_is_not_dropped(sim: SimCluster, token_file: Path) -> None:
    """limits.memory 2Ti, all of it used by the one pod: the raise needs headroom the quota does not have."""
    _load(sim, *big_memory("2Ti"))
    r = reactor_for(sim, token_file, memory={"max": "4Ti"})
    (outcome,) = _outcomes(r, "GPUContainerNearMemoryLimit", 0.95)
    assert (outcome["result"], outcome["reason"]) == ("skipped", "quota-exceeded")
    assert "limits.memory of quota memory" in outcome["detail"]


def test_a_gpu_count_spelled_1e0_is_one_gpu(sim: SimCluster, token_file: Path) -> None:
    _load(sim, EXPONENT_GPU)
    assert sim.get("deployments", NAMESPACE, "trainer")["spec"]["template"]["spec"]["containers"][0][
        "resources"]["limits"]["nvidia.com/gpu"] == "1e0"  # kept as written, as the API server keeps it
    r = reactor_for(sim, token_file, alerts={"GPUSaturated": ["resize-gpu-up"]})
    (outcome,) = _outcomes(r, "GPUSaturated", 0.99)
    assert (outcome["result"], outcome["action"], outcome["from"], outcome["to"]) == ("applied", "resize-gpu", 1, 2)
    (under,) = _outcomes(r, "GPUUnderutilized", 0.05)
    assert under["result"] == "skipped" and under["reason"] != "internal-error"
