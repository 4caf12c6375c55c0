"""CPU and memory quota as the operator will create pods: a CPU raise on one template of a RayService starts a whole
new RayCluster, and its head (another template, another PriorityClass, no GPUs) is charged its whole CPU to the
quotas whose scope matches it, as kube-apiserver's quota admission charges each new pod (pkg/quota/v1/evaluator/
core/pods.go podComputeUsageHelper, podMatchesScopeFunc). On KubeRay's real CRDs (../shared/crds), the RayService and
its RayCluster built as KubeRay builds them (tests/adapters/operators.py), and `reactor plan` on it showing the
charge in the refusal."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from reactor.app.assembly import build_engine
from reactor.cluster.adapted import adapted_workload
from reactor.core.model import ComputeResources
from reactor.intake.alerts import parse_notification
from reactor.integrations.adapters import BUILTIN
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from reactor_sim import SimCluster
from tests.adapters.conftest import POLICY
from tests.adapters.operators import (
    GPU,
    container,
    install_upstream,
    needs_shared,
    ray_service_cluster,
    ray_service_status,
)
from tests.adapters.steps import headroom, post
from tests.support import NAMESPACE, Reactor, build_reactor, make_settings

pytestmark = needs_shared

HIGH, MEDIUM = "high-priority-gpu", "medium-priority-gpu"
WORKER = "serve-a1b2c-gpu-workers-worker-00000"
THROTTLED = {"cpu_throttling": "0.5"}


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    """CPU raised in the running pods and the template both (`cpu.applyTo: both`): the template's rollout makes pods."""
    alerts = {**POLICY["alerts"], "GPUStarvedByCPU": ["resize-cpu-up"]}
    r = build_reactor(sim, make_settings(token_file, **{**POLICY, "alerts": alerts, "cpu": {"applyTo": "both"}}))
    try:
        yield r
    finally:
        r.service.kube.close()


def _with_cpu(spec: dict[str, Any], request: str, limit: str) -> dict[str, Any]:
    spec["resources"]["requests"]["cpu"], spec["resources"]["limits"]["cpu"] = request, limit
    return spec


def _ray_service(reactor: Reactor) -> None:
    """A RayService (upgradeStrategy NewCluster): a head of class high-priority-gpu with no GPUs and 2 / 4 CPUs
    (request / limit), and `gpu-workers` (2 × 4 GPUs, 2 CPUs, medium-priority-gpu); its active RayCluster as
    rayservice_controller.go constructRayClusterForRayService builds it (ray_service_cluster)."""
    install_upstream(reactor.sim, "ray.io_rayclusters.yaml", "ray.io_rayservices.yaml")
    head = {"priorityClassName": HIGH, "containers": [_with_cpu(container("ray-head", 0), "2", "4")]}
    worker = {"priorityClassName": MEDIUM, "containers": [_with_cpu(container("ray-worker", 4), "2", "2")]}
    reactor.sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService",
                       "metadata": {"name": "serve", "namespace": NAMESPACE},
                       "spec": {"serveConfigV2": "applications: []\n", "upgradeStrategy": {"type": "NewCluster"},
                                "rayClusterConfig": {
                                    "rayVersion": "2.40.0",
                                    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}},
                                    "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 2, "minReplicas": 0,
                                                          "maxReplicas": 4, "rayStartParams": {},
                                                          "template": {"spec": worker}}]}}})
    active = ray_service_cluster(reactor.sim, "serve", "a1b2c")
    ray_service_status(reactor.sim, "serve", active)


def _cpu_quota(reactor: Reactor, cls: str, headroom_m: int) -> None:
    """A ResourceQuota `high-cpu` on limits.cpu counting only pods of PriorityClass `cls`, its hard limit what those
    pods use now plus `headroom_m` millicores (its status as the quota controller computes it)."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "high-cpu", "namespace": NAMESPACE},
             "spec": {"hard": {"limits.cpu": "1000"},
                      "scopeSelector": {"matchExpressions": [
                          {"scopeName": "PriorityClass", "operator": "In", "values": [cls]}]}}}
    reactor.sim.apply(quota)
    reactor.sim.settle()
    found = reactor.sim.get("resourcequotas", NAMESPACE, "high-cpu")
    used = found["status"]["used"]["limits.cpu"]
    assert used == "4", found["status"]  # the active head's 4 CPUs: the quota counts the head, not the workers
    found["spec"]["hard"]["limits.cpu"] = f"{4000 + headroom_m}m"
    reactor.sim.apply(found)
    reactor.sim.settle()


def _plan(reactor: Reactor) -> str:
    """`reactor plan`: the engine in dry run and `print_plan`, as tests/adapters/test_plan.py runs them."""
    settings = reactor.service.engine.settings
    dry = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
    engine = build_engine(dry, kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    out = io.StringIO()
    alert = AlertSpec("GPUStarvedByCPU", NAMESPACE, WORKER, "ray-worker", 0.2, 4, extra_annotations=THROTTLED)
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(notification([alert]))), engine.settings)
    return out.getvalue()


def test_a_cpu_raise_charges_the_new_rayclusters_head_to_the_quota_of_its_class(reactor: Reactor) -> None:
    """Raising gpu-workers' CPU 2 → 3 through the template starts a whole new RayCluster, its head (class
    high-priority-gpu, 4 CPUs of limit) among it. A limits.cpu quota scoped to that class never counts a worker, yet
    it counts the new head: with 3999m of headroom there the raise is refused, naming the head's 4000m; the CPU
    check used to skip that quota and let it through (KubeRay's new head would then be refused by the API server and
    the new cluster never start)."""
    _ray_service(reactor)
    headroom(reactor, 100)
    _cpu_quota(reactor, HIGH, 3999)
    outcome = post(reactor, "GPUStarvedByCPU", WORKER, "ray-worker", value=0.2, gpus=4, extra_annotations=THROTTLED)
    assert outcome["reason"] == "quota-exceeded", outcome
    assert "needs 4000m of limits.cpu of quota high-cpu" in outcome["detail"], outcome
    assert "other templates' pods 4000m" in outcome["detail"], outcome
    text = _plan(reactor)
    assert "needs 4000m of limits.cpu of quota high-cpu" in text and "other templates' pods 4000m" in text, text
    _cpu_quota(reactor, HIGH, 4000)
    assert "would apply: resize-cpu ray-worker: 2000m → 3000m" in _plan(reactor)


def _worker_cpu(reactor: Reactor) -> dict[str, str]:
    service = reactor.sim.get("rayservices", NAMESPACE, "serve")
    group = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    (worker,) = group["template"]["spec"]["containers"]
    return {kind: worker["resources"][kind]["cpu"] for kind in ("requests", "limits")}


def test_a_cpu_raise_on_an_operators_template_is_written_through_its_own_fields(reactor: Reactor) -> None:
    """With the quota's room, the raise is applied: the RayService's own worker-group template carries the new CPU
    (a JSON merge patch of its container list, the GPUs and the rest of the container as they were), and the
    reactor's record with it. It used to fail in the act step: the operator's patch knew GPUs, replicas and
    priority only."""
    _ray_service(reactor)
    headroom(reactor, 100)
    _cpu_quota(reactor, HIGH, 4000)
    outcome = post(reactor, "GPUStarvedByCPU", WORKER, "ray-worker", value=0.2, gpus=4, extra_annotations=THROTTLED)
    assert (outcome["result"], outcome["action"], outcome["to"]) == ("applied", "resize-cpu", "3000m"), outcome
    assert _worker_cpu(reactor) == {"requests": "3", "limits": "3"}
    service = reactor.sim.get("rayservices", NAMESPACE, "serve")
    (worker,) = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert worker["resources"]["limits"][GPU] == "4" and worker["name"] == "ray-worker"


def test_an_operators_template_is_read_with_every_containers_cpu_and_memory(reactor: Reactor) -> None:
    """The surge pod of the changed template is charged whole: the reactor reads each of the part's containers with
    the CPU and memory its template sets, as it reads a Deployment's (a sidecar's limit counts as much as the GPU
    container's). It read GPUs only, so a quota saw the changed container alone."""
    _ray_service(reactor)
    service = reactor.sim.get("rayservices", NAMESPACE, "serve")
    group = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    group["template"]["spec"]["containers"].append(
        {"name": "log-shipper", "image": "registry.example.com/shipper:1",
         "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}})
    adapter = next(a for a in BUILTIN if a.kind == "RayService")
    workload = adapted_workload(adapter, service, "gpu-workers", GPU)
    assert workload is not None
    found = {c.name: (c.cpu, c.memory) for c in workload.containers}
    assert found["ray-worker"][0] == ComputeResources(request=2000, limit=2000)
    assert found["log-shipper"] == (ComputeResources(request=500, limit=1000),
                                    ComputeResources(request=256 << 20, limit=256 << 20))


def test_an_operators_template_is_read_with_its_sidecars(reactor: Reactor) -> None:
    """An init container with restartPolicy Always runs beside the containers: the policy's pod totals (LimitRange,
    the surge pod's quota charge) count it for an operator's template as for a Deployment's."""
    _ray_service(reactor)
    service = reactor.sim.get("rayservices", NAMESPACE, "serve")
    spec = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    spec["initContainers"] = [{"name": "proxy", "image": "registry.example.com/proxy:1", "restartPolicy": "Always",
                               "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]
    adapter = next(a for a in BUILTIN if a.kind == "RayService")
    workload = adapted_workload(adapter, service, "gpu-workers", GPU)
    assert workload is not None
    assert [(c.name, c.sidecar, c.cpu) for c in workload.init_containers] == [
        ("proxy", True, ComputeResources(request=1000, limit=1000))]
