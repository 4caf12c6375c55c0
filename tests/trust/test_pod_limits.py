"""Issue 23, item 6: LimitRange `type: Pod` items bound what the reactor writes, in the template and in place.

The namespace's admin sets a Pod max of 6 GPUs and 3 CPUs; the tenant (its own Role: patch Deployments) gives
llm-inference's sidecar 2 GPUs and 1 CPU beside the server's 4 GPUs and 2 CPUs. One GPU more for the server
would make 7 GPUs a pod, a CPU raise more than 3 CPUs: LimitRanger (admission.go, PodValidateLimitFunc) refuses such
pods, so a template write would stall the rollout, and an in-place resize would be a 403 after the decision. The
reactor refuses both before writing (`at-max-gpus`, `at-max-cpu`), nothing changes, and every pod keeps running.
With room under the Pod max the same alerts apply (the control), sized to what the max leaves.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.support import NAMESPACE, Reactor
from tests.trust.tenant import GPU, template_of

SHAPE = {"spec": {"template": {"spec": {"containers": [
    {"name": "server", "resources": {"requests": {GPU: "4", "cpu": "2"}, "limits": {GPU: "4", "cpu": "2"}}},
    {"name": "sidecar", "resources": {"requests": {GPU: "2", "cpu": "1"}, "limits": {GPU: "2", "cpu": "1"}}},
]}}}}


def _pod_limits(sim: SimCluster, *, gpus: int, cpu: str) -> None:
    sim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "per-pod", "namespace": NAMESPACE},
               "spec": {"limits": [{"type": "Pod", "max": {GPU: str(gpus), "cpu": cpu}}]}})


def _shaped(sim: SimCluster, tenant: k8s.ApiClient, *, gpus: int, cpu: str) -> None:
    _pod_limits(sim, gpus=gpus, cpu=cpu)
    k8s.AppsV1Api(tenant).patch_namespaced_deployment("llm-inference", NAMESPACE, SHAPE)
    sim.settle()


def _outcome(reactor: Reactor, name: str, **kw: Any) -> dict[str, Any]:
    pod = reactor.pods("llm-inference")[0]
    body = reactor.post(notification([AlertSpec(name, NAMESPACE, pod, "server", **kw)])).get_json()
    (outcome,) = body["outcomes"]
    return dict(outcome)


def _running_cpu(sim: SimCluster) -> set[str]:
    pods = sim.list("pods", NAMESPACE, label_selector="app=llm-inference")
    return {c["resources"]["limits"]["cpu"] for p in pods for c in p["spec"]["containers"] if c["name"] == "server"}


def _starved() -> dict[str, Any]:
    return {"value": 0.1, "gpus": 4, "extra_annotations": {"cpu_throttling": "0.600"}}


def test_a_gpu_raise_past_the_pod_max_is_refused_before_writing(reactor: Reactor, sim: SimCluster,
                                                               tenant: k8s.ApiClient) -> None:
    _shaped(sim, tenant, gpus=6, cpu="3")
    before = sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["resourceVersion"]
    outcome = _outcome(reactor, "GPUMemorySaturated", value=0.99, gpus=4)
    assert (outcome["result"], outcome["reason"]) == ("skipped", "at-max-gpus"), outcome
    assert sim.get("deployments", NAMESPACE, "llm-inference")["metadata"]["resourceVersion"] == before
    assert len(reactor.pods("llm-inference")) == 3


def test_an_in_place_cpu_raise_past_the_pod_max_is_refused_before_writing(reactor: Reactor, sim: SimCluster,
                                                                         tenant: k8s.ApiClient) -> None:
    _shaped(sim, tenant, gpus=6, cpu="3")
    annotations = sim.get("deployments", NAMESPACE, "llm-inference")["metadata"].get("annotations")
    outcome = _outcome(reactor, "GPUStarvedByCPU", **_starved())
    assert (outcome["result"], outcome["reason"]) == ("skipped", "at-max-cpu"), outcome
    assert _running_cpu(sim) == {"2"}
    assert sim.get("deployments", NAMESPACE, "llm-inference")["metadata"].get("annotations") == annotations


def test_with_room_under_the_pod_max_the_cpu_raise_applies_sized_to_it(reactor: Reactor, sim: SimCluster,
                                                                      tenant: k8s.ApiClient) -> None:
    """The control: a Pod max of 4 CPUs. The raise (2 × 1.6 = 3.2, a 3.25 step) stops at the 3 CPUs the sidecar's
    1 leaves, in place on the pod the alert names."""
    _shaped(sim, tenant, gpus=6, cpu="4")
    cpu = _outcome(reactor, "GPUStarvedByCPU", **_starved())
    assert (cpu["result"], cpu.get("to")) == ("applied", "3000m"), cpu
    assert _running_cpu(sim) == {"2", "3"}


def test_with_room_under_the_pod_max_the_gpu_raise_applies(reactor: Reactor, sim: SimCluster,
                                                           tenant: k8s.ApiClient) -> None:
    """The control: a Pod max of 7 GPUs. The template gets 5, and the new pods (7 GPUs each) are admitted."""
    _shaped(sim, tenant, gpus=7, cpu="3")
    gpus = _outcome(reactor, "GPUMemorySaturated", value=0.99, gpus=4)
    assert (gpus["result"], gpus.get("to")) == ("applied", 5), {k: gpus.get(k) for k in ("reason", "detail")}
    server = next(c for c in template_of(sim, "llm-inference")["containers"] if c["name"] == "server")
    assert server["resources"]["limits"][GPU] == "5"
    sim.settle()
    pods = sim.list("pods", NAMESPACE, label_selector="app=llm-inference")
    assert pods and all(c["resources"]["limits"][GPU] == "5" for p in pods for c in p["spec"]["containers"]
                        if c["name"] == "server" and not p["metadata"].get("deletionTimestamp"))
