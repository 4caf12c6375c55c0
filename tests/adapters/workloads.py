"""The tenants' objects several adapter test modules submit: Kueue's queues, the `llama` InferenceService, Ray
worker groups and a RayService. What an operator then builds from them is in tests/adapters/operators.py."""

from __future__ import annotations

from typing import Any

from reactor_sim import SimCluster
from tests.adapters.operators import GPU, container, install_upstream, reconcile_isvc
from tests.support import NAMESPACE

KUEUE_CRDS = tuple(f"kueue-v0.19.2/kueue.x-k8s.io_{p}.yaml" for p in (
    "workloadpriorityclasses", "clusterqueues", "localqueues", "workloads"))  # Kueue v0.19.2's: v1beta2 served
KUEUE_LABELS = {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "wpc-low"}  # queued, low


def kueue_queues(sim: SimCluster, api: str = "kueue.x-k8s.io/v1beta2", quota: int = 64) -> None:
    """WorkloadPriorityClasses wpc-low (100) and wpc-high (1000), ClusterQueue gpu-cq of `quota` GPUs of flavor h100
    and LocalQueue team-a → gpu-cq, at Kueue's API version `api` (its CRDs installed already)."""
    for name, value in (("wpc-low", 100), ("wpc-high", 1000)):
        sim.apply({"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
    sim.apply({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
               "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                   {"name": "h100", "resources": [{"name": GPU, "nominalQuota": quota}]}]}]}})
    sim.apply({"apiVersion": api, "kind": "LocalQueue",
               "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}})


def kueue_isvc(sim: SimCluster, **spec: Any) -> None:
    """A raw-mode InferenceService submitted to team-a at wpc-low (Kueue v0.19.2's CRDs and queues): 4 predictor
    replicas of 4 GPUs and any other components in `spec`, its Deployments as KServe's createRawDefaultDeployment
    builds them (reconcile_isvc: the ISVC's labels copied into each template by buildObjectMeta)."""
    install_upstream(sim, *KUEUE_CRDS)
    kueue_queues(sim)
    install_upstream(sim, "serving.kserve.io_inferenceservices.yaml")
    sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "llama", "namespace": NAMESPACE,
                            "labels": KUEUE_LABELS,
                            "annotations": {"serving.kserve.io/deploymentMode": "Standard"}},
               "spec": {"predictor": {"minReplicas": 4, "maxReplicas": 4,
                                      "containers": [container("kserve-container", 4)]}, **spec}})
    reconcile_isvc(sim, "llama")


def isvc_pods(sim: SimCluster, deployment: str = "llama-predictor") -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector="component=predictor")
                  if p["metadata"]["name"].startswith(f"{deployment}-"))


def llama_isvc(sim: SimCluster) -> None:
    """InferenceService `llama`: a predictor of 4 GPUs (model resources), min 2 / max 4 replicas, medium priority."""
    gpus = {"limits": {GPU: "4"}, "requests": {GPU: "4"}}
    sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "llama", "namespace": NAMESPACE},
               "spec": {"predictor": {"minReplicas": 2, "maxReplicas": 4,
                                      "priorityClassName": "medium-priority-gpu",
                                      "model": {"modelFormat": {"name": "huggingface"},
                                                "storageUri": "hf://meta-llama/Llama-3.1-8B",
                                                "resources": gpus}}}})


def ray_group(name: str, gpus: int, replicas: int, cls: str | None = None) -> dict[str, Any]:
    """A Ray worker group of `replicas` pods of one `ray-worker` container of `gpus` GPUs (PriorityClass `cls`)."""
    pod: dict[str, Any] = {"containers": [container("ray-worker", gpus)]}
    return {"groupName": name, "replicas": replicas, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
            "template": {"spec": {"priorityClassName": cls, **pod} if cls else pod}}


def ray_service(sim: SimCluster, groups: list[dict[str, Any]], head_gpus: int = 0,
                strategy: str | None = "NewCluster") -> None:
    """RayService `serve` of Ray 2.40.0: a head of `head_gpus` GPUs and worker `groups`, upgradeStrategy `strategy`
    (none where None)."""
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "serve", "namespace": NAMESPACE},
               "spec": {"serveConfigV2": "applications: []\n",
                        **({"upgradeStrategy": {"type": strategy}} if strategy else {}),
                        "rayClusterConfig": {
                            "rayVersion": "2.40.0",
                            "headGroupSpec": {"rayStartParams": {}, "template": {
                                "spec": {"containers": [container("ray-head", head_gpus)]}}},
                            "workerGroupSpecs": groups}}})


def vllm_lws(sim: SimCluster, rolling: dict[str, Any], *, labels: dict[str, str] | None = None,
             leader_class: str | None = None, worker_class: str | None = None) -> None:
    """LeaderWorkerSet `vllm` (its CRD installed already): 2 groups of 4, a 4-GPU leader and 3 workers of 8 GPUs (of
    PriorityClasses `leader_class` and `worker_class`, where given), rolled out by RollingUpdate `rolling`."""
    def template(name: str, gpus: int, cls: str | None) -> dict[str, Any]:
        pod: dict[str, Any] = {"containers": [container(name, gpus)]}
        return {"spec": {"priorityClassName": cls, **pod} if cls else pod}
    sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
               "metadata": {"name": "vllm", "namespace": NAMESPACE, **({"labels": labels} if labels else {})},
               "spec": {"replicas": 2,
                        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling},
                        "leaderWorkerTemplate": {"size": 4,
                                                 "leaderTemplate": template("vllm-leader", 4, leader_class),
                                                 "workerTemplate": template("vllm-worker", 8, worker_class)}}})
