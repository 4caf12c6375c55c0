"""The RBAC of deploy/reactor is sufficient and minimal, shown by running the reactor as its ServiceAccount.

The rendered deploy/reactor and the test GPU namespace are loaded into the embedded cluster with RBAC on;
the reactor talks to it with a ServiceAccount token from a TokenRequest (as its pod's projected token) and the
deployed policy. Every webhook flow below
succeeds with the grants as committed; then each grant (one verb of one resource) is taken away in turn
and the flow that needs it is shown to fail, exactly as the refusal surfaces.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client import ApiException
from prometheus_client import CollectorRegistry

from reactor.app.assembly import assemble
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.errors import PermanentError
from reactor.core.metrics import Metrics
from reactor.tools.launcher import state_key_file
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.adapters.operators import (
    JOBSET,
    container,
    install,
    ray_service_cluster,
    ray_service_status,
    reconcile_isvc,
    reconcile_isvc_serverless,
    reconcile_jobset,
    reconcile_lws,
    reconcile_notebook,
    reconcile_ray,
)
from tests.deploy.deploy_helpers import DEPLOY, render
from tests.support import HERE, NAMESPACE, Reactor, feeding_client, release, with_prometheus

SA_USER = "system:serviceaccount:gpu-reactor:gpu-reactor"
GPU = "nvidia.com/gpu"
ENFORCE = {"gpu-reactor.io/mode": "enforce"}


# -- the cluster and the reactor as deployed ---------------------------------------------------------


def _cluster(reactor_objects: list[dict[str, Any]]) -> SimCluster:
    sim = SimCluster(rbac=True).start()
    fixture = yaml.safe_load_all((HERE / "fixtures" / "cluster.yaml").read_text())
    sim.apply([*[d for d in fixture if d], *copy.deepcopy(reactor_objects)])
    for kind, name in (("deployments", "llm-inference"), ("statefulsets", "trainer")):
        _annotate(sim, kind, name, ENFORCE)  # the deployed policy's defaultMode is recommend: teams opt in
    sim.apply({"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": {"name": "nightly", "namespace": NAMESPACE, "annotations": ENFORCE},
               "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "train", "image": "registry.example.com/train:1",
                                                             "resources": {"limits": {GPU: "4"}, "requests": {GPU: "4"}}}]}}}}}})
    sim.settle()
    _operators(sim)
    return sim


def _sa_token(sim: SimCluster) -> str:
    """The ServiceAccount's token, as the kubelet gets it for the reactor's pod: a TokenRequest (here the admin's)."""
    config = k8s.Configuration(host=sim.url)
    config.api_key = {"BearerToken": sim.admin_token or ""}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    with k8s.ApiClient(config) as c:
        issued = k8s.CoreV1Api(c).create_namespaced_service_account_token(
            "gpu-reactor", "gpu-reactor", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                           "spec": {"expirationSeconds": 3600}})
    return str(issued.status.token)


def _operators(sim: SimCluster) -> None:
    """A Notebook, an InferenceService and a RayCluster (4 GPUs each, opted in), with what their operators
    create (played by the test: see tests/adapters/operators.py)."""
    install(sim, "kubeflow.org_notebooks.yaml", "serving.kserve.io_inferenceservices.yaml", "ray.io_rayclusters.yaml",
            "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    meta = lambda name: {"name": name, "namespace": NAMESPACE, "annotations": ENFORCE}  # noqa: E731
    sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": meta("jupyter"),
               "spec": {"template": {"spec": {"containers": [container("notebook", 4)]}}}})
    sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta("llama"),
               "spec": {"predictor": {"minReplicas": 1, "containers": [container("kserve-container", 4)]}}})
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",  # its owners accept Recreate's restart (issue 36)
               "metadata": {**meta("ray"), "annotations": {**ENFORCE, "gpu-reactor.io/allow-recreate": "true"}},
               "spec": {"upgradeStrategy": {"type": "Recreate"},  # KubeRay carries template changes (issue 24)
                        "headGroupSpec": {"template": {"spec": {"containers": [container("ray-head", 0)]}}},
                        "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 1, "template": {
                            "spec": {"containers": [container("ray-worker", 4)]}}}]}})
    reconcile_notebook(sim, "jupyter")
    reconcile_isvc(sim, "llama")
    install(sim, "serving.knative.dev.yaml")  # KServe's serverless mode: Knative Serving under the predictor
    sim.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta("mistral"),
               "spec": {"predictor": {"minReplicas": 1, "containers": [container("kserve-container", 4)]}}})
    reconcile_isvc_serverless(sim, "mistral")
    reconcile_ray(sim, "ray")
    sim.apply({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta("vllm"),
               "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                   "spec": {"containers": [container("vllm", 4)]}}}}})
    reconcile_lws(sim, "vllm")
    install(sim, "ray.io_rayservices.yaml")
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta("serve"),
               "spec": {"upgradeStrategy": {"type": "NewCluster"}, "rayClusterConfig": {
                   "headGroupSpec": {"template": {"spec": {"containers": [container("ray-head", 0)]}}},
                   "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 1, "template": {
                       "spec": {"containers": [container("ray-worker", 4)]}}}]}}})
    ray_service_status(sim, "serve", ray_service_cluster(sim, "serve", "a1b2c"))
    _kueue(sim)


def _kueue(sim: SimCluster) -> None:
    """A Deployment admitted by Kueue (queue team-a → ClusterQueue gpu-cq, its quota all in use) whose priority is
    a WorkloadPriorityClass named like the ladder's classes."""
    install(sim, "kueue.x-k8s.io-v1beta2.yaml")  # Kueue v0.15+: the priority label may change
    for name, value in (("medium-priority-gpu", 100), ("high-priority-gpu", 1000)):
        sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                   "value": value})
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
               "spec": {"resourceGroups": [{"flavors": [{"name": "h100", "resources": [
                   {"name": GPU, "nominalQuota": 4}]}]}]}})
    res = sim.registry.by_plural("clusterqueues")
    with sim.store.lock:
        sim.api.patch(res, None, "gpu-cq", "application/merge-patch+json", {"status": {"flavorsUsage": [
            {"name": "h100", "resources": [{"name": GPU, "total": 4}]}]}}, subresource="status")
    sim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "team-a", "namespace": NAMESPACE}, "spec": {"clusterQueue": "gpu-cq"}})
    labels = {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "medium-priority-gpu"}
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "queued", "namespace": NAMESPACE, "labels": labels, "annotations": ENFORCE},
               # Kueue v0.15+ copies the label into the pod template: the change rolls the pod, with no surge
               # here (the ClusterQueue is full), so it fits (issue 24: checked like a template change).
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "queued"}},
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                        "template": {"metadata": {"labels": {"app": "queued"}},
                                     "spec": {"containers": [container("server", 4)]}}}})
    sim.settle()
    install(sim, "jobset.x-k8s.io_jobsets.yaml")  # a JobSet Kueue admits: its webhook leaves it only the label
    sim.apply({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
               "metadata": {"name": "train", "namespace": NAMESPACE, "labels": labels, "annotations": ENFORCE},
               "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
                   "template": {"spec": {"restartPolicy": "Never", "containers": [container("trainer", 4)]}}}}}]}})
    reconcile_jobset(sim, "train")


def _annotate(sim: SimCluster, resource: str, name: str, annotations: dict[str, str]) -> None:
    obj = sim.get(resource, NAMESPACE, name)
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    sim.apply(obj)


def _reactor(sim: SimCluster, token_file: Path, *, cache: bool = False) -> Reactor:
    """tests.support.build_reactor, but with the deployed policy and the ServiceAccount's token.

    Without `cache` every read is a request (what the reactor does while its watch cache is not synced);
    with it, the informers are built (tests/deploy/test_rbac_cache_proof.py starts them)."""
    doc = yaml.safe_load((DEPLOY / "reactor" / "policy.yaml").read_text())
    doc.update(server={"tokenFile": str(token_file)}, state={"keyFile": str(state_key_file(token_file.parent))},
               kube={"timeout": "2s", "qps": 1000, "burst": 1000, "conflictRetries": 3, "watchCache": cache},
               logging={"format": "text"})
    settings, stand_in = with_prometheus(build_settings(doc, {}), instead=True)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    kube = KubeGateway.for_url(sim.url, settings.kube, metrics, token=_sa_token(sim))
    service = assemble(settings, kube=kube, metrics=metrics)
    service.app.testing = True
    reactor = Reactor(service, feeding_client(service, stand_in), sim, registry, stand_in)
    release(reactor)
    return reactor


@pytest.fixture(scope="module")
def reactor_objects() -> list[dict[str, Any]]:
    return render("reactor")


@pytest.fixture
def sim(reactor_objects: list[dict[str, Any]]) -> Iterator[SimCluster]:
    cluster = _cluster(reactor_objects)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def reactor(sim: SimCluster, token_file: Path) -> Iterator[Reactor]:
    r = _reactor(sim, token_file)
    try:
        yield r
    finally:
        r.service.kube.close()


# -- the flows: each returns the outcomes of one notification ----------------------------------------


@dataclass(frozen=True)
class Answer:
    code: int
    outcomes: list[dict[str, Any]]
    error: str = ""

    @property
    def results(self) -> set[tuple[str, ...]]:
        return {(o["result"], o.get("action") or o.get("reason") or "") for o in self.outcomes}


def _post(r: Reactor, specs: list[AlertSpec]) -> Answer:
    answer = r.post(notification(specs, group_by=("namespace",)))
    body = answer.get_json()
    return Answer(answer.status_code, body.get("outcomes", []), body.get("error", ""))


def deployment_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on the three pods of a Deployment: shrink its template 4 → 3 GPUs."""
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, p, "server") for p in r.pods("llm-inference")])


def statefulset_resize(r: Reactor) -> Answer:
    """GPUSaturated on a StatefulSet's two pods: grow its template 2 → 3 GPUs."""
    return _post(r, [AlertSpec("GPUSaturated", NAMESPACE, p, "trainer", 0.98, 2) for p in r.pods("trainer")])


def cronjob_via_job(r: Reactor) -> Answer:
    """GPUUnderutilized on a pod of a CronJob's run: the CronJob's jobTemplate shrinks 4 → 1 for the next run."""
    job = r.sim.trigger_cronjob(NAMESPACE, "nightly")
    assert job is not None
    r.sim.settle()
    (pod,) = [p["metadata"]["name"] for p in r.sim.list("pods", NAMESPACE)
              if p["metadata"]["ownerReferences"][0]["name"] == job["metadata"]["name"]]
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, pod, "train", 0.1, 4)])


def hpa_check(r: Reactor) -> Answer:
    """GPUIdle on a Deployment an HPA scales: scale-replicas is considered and refused (hpa-managed), so the
    template shrinks 4 → 1 instead."""
    r.sim.apply({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": "llm-inference", "namespace": NAMESPACE},
                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-inference"},
                          "minReplicas": 1, "maxReplicas": 5}})
    return _post(r, [AlertSpec("GPUIdle", NAMESPACE, p, "server", 0.0, 4) for p in r.pods("llm-inference")])


def set_priority(r: Reactor) -> Answer:
    """GPUSaturated on the StatefulSet with the quota spent: no more GPUs or replicas fit, so its priority
    class goes up the ladder (medium → high), which needs the cluster's PriorityClasses."""
    quota = r.sim.get("resourcequotas", NAMESPACE, "gpu-quota")
    quota["spec"]["hard"][f"requests.{GPU}"] = quota["status"]["used"][f"requests.{GPU}"]  # all in use
    r.sim.apply(quota)
    return _post(r, [AlertSpec("GPUSaturated", NAMESPACE, p, "trainer", 0.98, 2) for p in r.pods("trainer")])


def namespace_wide(r: Reactor) -> Answer:
    """One notification on five pods of a namespace: the reactor lists the namespace's pods once instead
    of reading each, then shrinks both workloads."""
    specs = [AlertSpec("GPUUnderutilized", NAMESPACE, p, "server") for p in r.pods("llm-inference")]
    specs += [AlertSpec("GPUUnderutilized", NAMESPACE, p, "trainer") for p in r.pods("trainer")]
    return _post(r, specs)


def cpu_resize(r: Reactor) -> Answer:
    """GPUStarvedByCPU on a throttled loader: its running pod gets CPU in place (pods/resize), 2 → 3 cores."""
    r.sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "loader", "namespace": NAMESPACE, "annotations": ENFORCE},
                 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "loader"}}, "template": {
                     "metadata": {"labels": {"app": "loader"}}, "spec": {"containers": [{
                         "name": "main", "image": "registry.example.com/loader:1",
                         "resources": {"limits": {GPU: "1", "cpu": "2"}, "requests": {GPU: "1", "cpu": "2"}}}]}}}})
    r.sim.settle()
    return _post(r, [AlertSpec("GPUStarvedByCPU", NAMESPACE, p, "main", 0.1, 1,
                               extra_annotations={"cpu_throttling": "0.5"}) for p in r.pods("loader")])


def notebook_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a Kubeflow Notebook's pod: the Notebook's template shrinks 4 → 1 (merge patch)."""
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, "jupyter-0", "notebook", 0.1, 4)])


def isvc_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a KServe predictor's pod: the InferenceService's predictor shrinks 4 → 1."""
    pods = r.sim.list("pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=llama")
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, p["metadata"]["name"], "kserve-container", 0.1, 4)
                     for p in pods])


def isvc_serverless_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a serverless predictor's pod: the Knative Revision, Configuration and Service above its
    Deployment are read to believe each link, then the InferenceService's predictor shrinks 4 → 1."""
    pods = r.sim.list("pods", NAMESPACE, label_selector="serving.kserve.io/inferenceservice=mistral")
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, p["metadata"]["name"], "kserve-container", 0.1, 4)
                     for p in pods])


def ray_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a Ray worker: the RayCluster's worker group template shrinks 4 → 1."""
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, "ray-gpu-workers-worker-00000", "ray-worker", 0.1, 4)])


def lws_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a LeaderWorkerSet's worker: the LWS's worker template shrinks 4 → 1 for every group."""
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, "vllm-0-1", "vllm", 0.1, 4)])


def rayservice_resize(r: Reactor) -> Answer:
    """GPUUnderutilized on a RayService's worker: its rayClusterConfig's worker group shrinks 4 → 1 (the pod's
    RayCluster is read to believe the link, then the RayService is read and patched)."""
    return _post(r, [AlertSpec("GPUUnderutilized", NAMESPACE, "serve-a1b2c-gpu-workers-worker-00000", "ray-worker",
                               0.1, 4)])


def jobset_priority(r: Reactor) -> Answer:
    """GPUSaturated on a JobSet Kueue admits: its webhook forbids every template change, so the priority goes up
    through its kueue.x-k8s.io/priority-class label (the pod → Job → JobSet links read on the way)."""
    pods = r.sim.list("pods", NAMESPACE, label_selector=f"{JOBSET}=train")
    return _post(r, [AlertSpec("GPUSaturated", NAMESPACE, p["metadata"]["name"], "trainer", 0.98, 4) for p in pods])


def kueue_priority(r: Reactor) -> Answer:
    """GPUSaturated on a Kueue workload whose ClusterQueue is full: no growth fits (LocalQueue → ClusterQueue), so
    its kueue.x-k8s.io/priority-class label goes up the ladder, a WorkloadPriorityClass that exists."""
    return _post(r, [AlertSpec("GPUSaturated", NAMESPACE, p, "server", 0.98, 4) for p in r.pods("queued")])


def verify(r: Reactor) -> Answer:
    """deployment-resize, then one verifier pass once the rollout is done: the replica takes the verifier Lease,
    finds the Deployment on the Lease's list and marks it verified (issue 14: verify after acting)."""
    answer = deployment_resize(r)
    r.sim.settle()
    assert r.service.verifier is not None
    r.service.verifier.check_all()
    return answer


def revert_refused(r: Reactor) -> Answer:
    """deployment-resize; its rollout never ends (nothing runs the Deployment controller) and the API server refuses
    the revert (a 422 on every patch of a Deployment): two verifier passes past verify.timeout try it twice, and
    the second try's RolloutStalled Warning is counted on the first one (a PATCH of the Event, as client-go's
    event correlator does) rather than created again (issue 21)."""
    answer = deployment_resize(r)
    verifier = r.service.verifier
    assert verifier is not None
    later = datetime.now(UTC) + r.service.engine.policy.verify_timeout
    r.sim.inject_fault(verb="patch", resource="deployments", status=422, count=10)
    try:
        for wait in (timedelta(seconds=1), timedelta(hours=1)):
            verifier.clock = lambda wait=wait: later + wait  # type: ignore[misc]
            verifier.check_all()
        r.flush_events()
    finally:
        r.sim.clear_faults()
    return answer


def _stalled_warnings(s: SimCluster) -> str:
    counts = [e.get("count", 1) for e in _gpu_reactor_events(s) if e["reason"] == "RolloutStalled"]
    return ",".join(str(c) for c in counts)


Flow = Callable[[Reactor], Answer]
# What each flow does when every grant is there.
EXPECTED: dict[str, tuple[Flow, set[tuple[str, ...]]]] = {
    "deployment-resize": (deployment_resize, {("applied", "resize-gpu")}),
    "statefulset-resize": (statefulset_resize, {("applied", "resize-gpu")}),
    "cronjob-via-job": (cronjob_via_job, {("applied", "resize-gpu")}),
    "hpa-check": (hpa_check, {("applied", "resize-gpu")}),
    "set-priority": (set_priority, {("applied", "set-priority")}),
    "namespace-wide": (namespace_wide, {("applied", "resize-gpu")}),
    "cpu-resize": (cpu_resize, {("applied", "resize-cpu")}),
    "notebook-resize": (notebook_resize, {("applied", "resize-gpu")}),
    "isvc-resize": (isvc_resize, {("applied", "resize-gpu")}),
    "isvc-serverless-resize": (isvc_serverless_resize, {("applied", "resize-gpu")}),
    "ray-resize": (ray_resize, {("applied", "resize-gpu")}),
    "lws-resize": (lws_resize, {("applied", "resize-gpu")}),
    "kueue-priority": (kueue_priority, {("applied", "set-priority")}),
    "rayservice-resize": (rayservice_resize, {("applied", "resize-gpu")}),
    "jobset-priority": (jobset_priority, {("applied", "set-priority")}),
    "verify": (verify, {("applied", "resize-gpu")}),
    "revert-refused": (revert_refused, {("applied", "resize-gpu")}),
}


def _template_gpus(sim: SimCluster, resource: str, name: str) -> str:
    spec = sim.get(resource, NAMESPACE, name)["spec"]
    pod = (spec["jobTemplate"]["spec"] if resource == "cronjobs" else spec)["template"]["spec"]
    return str(pod["containers"][0]["resources"]["limits"][GPU])


# What each flow changes: (resource, name) -> the template's GPUs (or priority class) after it ran.
CHANGES: dict[str, Callable[[SimCluster], tuple[str, ...]]] = {
    "deployment-resize": lambda s: (_template_gpus(s, "deployments", "llm-inference"),),
    "statefulset-resize": lambda s: (_template_gpus(s, "statefulsets", "trainer"),),
    "cronjob-via-job": lambda s: (_template_gpus(s, "cronjobs", "nightly"),),
    "hpa-check": lambda s: (_template_gpus(s, "deployments", "llm-inference"),),
    "set-priority": lambda s: (s.get("statefulsets", NAMESPACE, "trainer")["spec"]["template"]["spec"]["priorityClassName"],),
    "namespace-wide": lambda s: (_template_gpus(s, "deployments", "llm-inference"), _template_gpus(s, "statefulsets", "trainer")),
    "cpu-resize": lambda s: tuple(str(p["spec"]["containers"][0]["resources"]["limits"]["cpu"])
                                  for p in s.list("pods", NAMESPACE, label_selector="app=loader")) or ("2",),
    "notebook-resize": lambda s: (_limit(s.get("notebooks", NAMESPACE, "jupyter")["spec"]["template"]["spec"]),),
    "isvc-resize": lambda s: (_limit(s.get("inferenceservices", NAMESPACE, "llama")["spec"]["predictor"]),),
    "isvc-serverless-resize": lambda s: (_limit(s.get("inferenceservices", NAMESPACE, "mistral")["spec"]["predictor"]),),
    "ray-resize": lambda s: (
        _limit(s.get("rayclusters", NAMESPACE, "ray")["spec"]["workerGroupSpecs"][0]["template"]["spec"]),),
    "lws-resize": lambda s: (_limit(
        s.get("leaderworkersets", NAMESPACE, "vllm")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]),),
    "kueue-priority": lambda s: (s.get("deployments", NAMESPACE, "queued")["metadata"]["labels"][
        "kueue.x-k8s.io/priority-class"],),
    "verify": lambda s: (_template_gpus(s, "deployments", "llm-inference"), _verified(s)),
    "revert-refused": lambda s: (_template_gpus(s, "deployments", "llm-inference"), _verified(s), _stalled_warnings(s)),
    "rayservice-resize": lambda s: (_limit(
        s.get("rayservices", NAMESPACE, "serve")["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]),),
    "jobset-priority": lambda s: (s.get("jobsets", NAMESPACE, "train")["metadata"]["labels"][
        "kueue.x-k8s.io/priority-class"],),
}
BEFORE = {"deployment-resize": ("4",), "statefulset-resize": ("2",), "cronjob-via-job": ("4",), "hpa-check": ("4",),
          "set-priority": ("medium-priority-gpu",), "namespace-wide": ("4", "2"), "cpu-resize": ("2",),
          "notebook-resize": ("4",), "isvc-resize": ("4",), "isvc-serverless-resize": ("4",), "ray-resize": ("4",), "lws-resize": ("4",),
          "kueue-priority": ("medium-priority-gpu",), "verify": ("4", ""), "rayservice-resize": ("4",),
          "revert-refused": ("4", "", ""),
          "jobset-priority": ("medium-priority-gpu",)}
AFTER = {"deployment-resize": ("3",), "statefulset-resize": ("3",), "cronjob-via-job": ("1",), "hpa-check": ("1",),
         "set-priority": ("high-priority-gpu",), "namespace-wide": ("3", "1"), "cpu-resize": ("3",),
         "notebook-resize": ("1",), "isvc-resize": ("1",), "isvc-serverless-resize": ("1",), "ray-resize": ("1",), "lws-resize": ("1",),
         "kueue-priority": ("high-priority-gpu",), "verify": ("3", "verified"), "rayservice-resize": ("1",),
         "revert-refused": ("3", "pending", "2"),
         "jobset-priority": ("high-priority-gpu",)}


def _limit(pod_spec: dict[str, Any]) -> str:
    return str(pod_spec["containers"][0]["resources"]["limits"][GPU])


def _verified(sim: SimCluster) -> str:
    raw = (sim.get("deployments", NAMESPACE, "llm-inference")["metadata"].get("annotations") or {}).get(
        "gpu-reactor.io/verification")
    return json.loads(raw)["result"] if raw else ""


def _gpu_reactor_events(sim: SimCluster) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", NAMESPACE) if (e.get("source") or {}).get("component") == "gpu-reactor"]


@pytest.mark.parametrize("flow", sorted(EXPECTED))
def test_every_flow_succeeds_with_the_deployed_grants(reactor: Reactor, sim: SimCluster, flow: str) -> None:
    """As deployed, the ServiceAccount may make every call each flow needs: the change is written, an
    Event recorded, and no request is refused."""
    run, expected = EXPECTED[flow]
    assert CHANGES[flow](sim) == BEFORE[flow]
    answer = run(reactor)
    assert (answer.code, answer.results) == (200, expected), answer
    assert CHANGES[flow](sim) == AFTER[flow]
    assert _gpu_reactor_events(sim), "the action is recorded as an Event on the workload"
    assert not sim.denied


def test_readiness_needs_no_grant(reactor: Reactor, sim: SimCluster) -> None:
    """/readyz asks the API server for `/version/` (the client's path), which system:discovery and
    system:public-info-viewer grant every authenticated user."""
    assert reactor.probe("/readyz").status == 200
    assert sim.requests[("get", "/version/", "")] == 1 and not sim.denied


# -- minimality: every grant is needed ---------------------------------------------------------------

Grant = tuple[str, str, str, str]  # (role, apiGroup, resource, verb)


def _grants(objs: list[dict[str, Any]]) -> list[Grant]:
    out: list[Grant] = []
    for obj in objs:
        if obj["kind"] in ("ClusterRole", "Role"):
            for rule in obj["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        out += [(obj["metadata"]["name"], group, resource, verb) for verb in rule["verbs"]]
    return out


def _without(objs: list[dict[str, Any]], grant: Grant) -> list[dict[str, Any]]:
    """The rendered manifests with one verb of one resource taken out of one role, all else kept."""
    role, group, resource, verb = grant
    out = copy.deepcopy(objs)
    for obj in out:
        if obj["kind"] in ("ClusterRole", "Role") and obj["metadata"]["name"] == role:
            rules = []
            for rule in obj["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        verbs = [v for v in rule["verbs"] if (g, r, v) != (group, resource, verb)]
                        if verbs:
                            rules.append({"apiGroups": [g], "resources": [r], "verbs": verbs})
            obj["rules"] = rules
    return out


# (apiGroup, resource, verb) -> the flow that needs it and how losing it shows:
#   read  - the call is refused and the flow writes nothing;
#   write - the patch is refused: the alerts' outcome is `failed`/`api-error` with the 403 message;
#   event - the change is written, but its Event (the audit trail in `kubectl describe`) is refused;
#   event-count - a repeat of an Event is refused: the first one stays, never counted up;
#   state - the change is written, its record (an InferenceService's state Lease) refused: `failed`, named.
NEEDED_BY: dict[tuple[str, str, str], tuple[str, str]] = {
    ("scheduling.k8s.io", "priorityclasses", "list"): ("set-priority", "read"),
    ("", "pods", "get"): ("deployment-resize", "read"),
    ("", "pods", "list"): ("namespace-wide", "read"),
    ("", "limitranges", "list"): ("deployment-resize", "read"),
    ("", "resourcequotas", "list"): ("deployment-resize", "read"),
    ("", "events", "create"): ("deployment-resize", "event"),
    ("", "events", "patch"): ("revert-refused", "event-count"),
    ("", "pods/resize", "patch"): ("cpu-resize", "write"),
    ("apps", "replicasets", "get"): ("deployment-resize", "read"),
    ("apps", "deployments", "get"): ("deployment-resize", "read"),
    ("apps", "deployments", "patch"): ("deployment-resize", "write"),
    ("apps", "statefulsets", "get"): ("statefulset-resize", "read"),
    ("apps", "statefulsets", "patch"): ("statefulset-resize", "write"),
    ("batch", "jobs", "get"): ("cronjob-via-job", "read"),
    ("batch", "cronjobs", "get"): ("cronjob-via-job", "read"),
    ("batch", "cronjobs", "patch"): ("cronjob-via-job", "write"),
    ("autoscaling", "horizontalpodautoscalers", "list"): ("hpa-check", "read"),
    ("kubeflow.org", "notebooks", "get"): ("notebook-resize", "read"),
    ("kubeflow.org", "notebooks", "patch"): ("notebook-resize", "write"),
    ("serving.kserve.io", "inferenceservices", "get"): ("isvc-resize", "read"),
    ("serving.kserve.io", "inferenceservices", "patch"): ("isvc-resize", "write"),
    ("serving.knative.dev", "revisions", "get"): ("isvc-serverless-resize", "read"),
    ("serving.knative.dev", "configurations", "get"): ("isvc-serverless-resize", "read"),
    ("serving.knative.dev", "services", "get"): ("isvc-serverless-resize", "read"),
    ("ray.io", "rayclusters", "get"): ("ray-resize", "read"),
    ("ray.io", "rayclusters", "patch"): ("ray-resize", "write"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets", "get"): ("lws-resize", "read"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets", "patch"): ("lws-resize", "write"),
    ("ray.io", "rayservices", "get"): ("rayservice-resize", "read"),
    ("ray.io", "rayservices", "patch"): ("rayservice-resize", "write"),
    ("jobset.x-k8s.io", "jobsets", "get"): ("jobset-priority", "read"),
    ("jobset.x-k8s.io", "jobsets", "patch"): ("jobset-priority", "write"),
    ("kueue.x-k8s.io", "localqueues", "get"): ("kueue-priority", "read"),
    ("kueue.x-k8s.io", "clusterqueues", "get"): ("kueue-priority", "read"),
    ("kueue.x-k8s.io", "workloadpriorityclasses", "list"): ("kueue-priority", "read"),
    ("coordination.k8s.io", "leases", "get"): ("verify", "lease"),
    ("coordination.k8s.io", "leases", "create"): ("verify", "lease"),
    ("coordination.k8s.io", "leases", "update"): ("verify", "lease"),
}


# The operators' role's grants on Leases: an InferenceService's state Lease `<isvc>.gpu-reactor` (README: Operators),
# the same (group, resource, verb) as the verifier Lease's grants in the reactor's own namespace, so kept apart.
STATE_NEEDED: dict[tuple[str, str, str], tuple[str, str]] = {
    ("coordination.k8s.io", "leases", "get"): ("isvc-resize", "read"),
    ("coordination.k8s.io", "leases", "create"): ("isvc-resize", "write"),
    ("coordination.k8s.io", "leases", "patch"): ("isvc-resize", "state"),
}
OPERATORS_ROLE = "gpu-reactor-operators"


# Grants only the read cache needs (kube.watchCache, on in the deployed policy): without one, that kind's
# informer cannot list or follow it, and /readyz names the refusal (tests/deploy/test_rbac_cache_proof.py).
CACHE_NEEDED: frozenset[tuple[str, str, str]] = frozenset(
    {(g, r, "list") for g, r in (("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets"),
                                 ("batch", "jobs"), ("batch", "cronjobs"))}
    | {(g, r, "watch") for g, r in (("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets"),
                                    ("batch", "jobs"), ("batch", "cronjobs"), ("", "limitranges"),
                                    ("", "resourcequotas"), ("autoscaling", "horizontalpodautoscalers"),
                                    ("scheduling.k8s.io", "priorityclasses"))})


# Grants whose refusal is met once per pod of the flow rather than once in all.
# The Lease's get and create are refused twice: when the action is put on its list, and in the verifier's pass.
DENIALS: dict[tuple[str, str, str], int] = {("", "pods", "get"): 3, ("coordination.k8s.io", "leases", "get"): 2,
                                            ("coordination.k8s.io", "leases", "create"): 2}


def _forbidden_text(group: str, resource: str, verb: str) -> str:
    cluster = resource in ("priorityclasses", "clusterqueues", "workloadpriorityclasses")
    scope = "at the cluster scope" if cluster else f'in the namespace "{NAMESPACE}"'
    return f'User "{SA_USER}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'


def test_the_table_names_every_grant_of_the_manifests(reactor_objects: list[dict[str, Any]]) -> None:
    """A grant added to deploy/reactor without a flow here that needs it fails this test (and the reverse)."""
    assert sorted((g, r, v) for _, g, r, v in _grants(reactor_objects)) == sorted([*NEEDED_BY, *CACHE_NEEDED,
                                                                                  *STATE_NEEDED])


@pytest.mark.parametrize("grant", sorted(NEEDED_BY), ids=lambda g: f"{g[2]}-{g[1] or 'core'}-{g[0]}")
def test_each_grant_is_needed(reactor_objects: list[dict[str, Any]], token_file: Path, grant: tuple[str, str, str]) -> None:
    """Without this one grant (everything else as deployed), the flow that needs it is refused exactly that
    call — a 403 with the upstream message — and fails the way the table says."""
    (role,) = {g[0] for g in _grants(reactor_objects) if g[1:] == grant} - (
        {OPERATORS_ROLE} if grant in STATE_NEEDED else set())
    _check_grant(reactor_objects, token_file, grant, role, *NEEDED_BY[grant])


@pytest.mark.parametrize("grant", sorted(STATE_NEEDED), ids=lambda g: f"{g[2]}-state-{g[1]}")
def test_each_state_lease_grant_is_needed(reactor_objects: list[dict[str, Any]], token_file: Path,
                                          grant: tuple[str, str, str]) -> None:
    """The operators' role's Lease grants (an InferenceService's state), one at a time, as above."""
    _check_grant(reactor_objects, token_file, grant, OPERATORS_ROLE, *STATE_NEEDED[grant])


def _check_grant(reactor_objects: list[dict[str, Any]], token_file: Path, grant: tuple[str, str, str], role: str,
                 flow: str, how: str) -> None:
    group, resource, verb = grant
    sim = _cluster(_without(reactor_objects, (role, group, resource, verb)))
    r = _reactor(sim, token_file)
    try:
        answer, escaped = None, ""
        try:
            answer = EXPECTED[flow][0](r)
        except PermanentError as e:  # see test_a_refused_read_is_answered_with_an_outcome
            escaped = str(e)
        # Each refused object is asked for once per notification; pods are distinct objects, one read each.
        plural, _, subresource = resource.partition("/")
        assert sim.denied == {(verb, plural, subresource): 1 if role == OPERATORS_ROLE else DENIALS.get(grant, 1)}
        if how == "lease":  # the change stands; without its Lease no replica verifies it
            assert answer is not None and (answer.code, answer.results) == (200, EXPECTED[flow][1])
            assert CHANGES[flow](sim) == ("3", "pending")
            return
        if how == "event-count":  # the repeat is refused: the first Warning stays, counted once
            assert answer is not None and (answer.code, answer.results) == (200, EXPECTED[flow][1])
            assert CHANGES[flow](sim) == ("3", "pending", "1")
            return
        if how == "state":
            assert answer is not None and answer.code == 200 and answer.results == {("failed", "api-error")}
            assert CHANGES[flow](sim) == AFTER[flow]
            assert all("the record of it was refused" in o["detail"] and _forbidden_text(group, resource, verb)
                       in o["detail"] for o in answer.outcomes)
            return
        if how == "event":
            assert answer is not None and (answer.code, answer.results) == (200, EXPECTED[flow][1])
            assert CHANGES[flow](sim) == AFTER[flow] and _gpu_reactor_events(sim) == []
            return
        assert CHANGES[flow](sim) == BEFORE[flow], "nothing is written"
        if how == "write":
            assert answer is not None and answer.code == 200 and answer.results == {("failed", "api-error")}
            assert all(_forbidden_text(group, resource, verb) in o["detail"] for o in answer.outcomes)
        else:
            surfaced = escaped or " ".join(o.get("detail", "") for o in (answer.outcomes if answer else []))
            assert _forbidden_text(group, resource, verb) in surfaced
    finally:
        r.service.kube.close()
        sim.stop()


@pytest.mark.parametrize("grant", [("", "pods", "get"), ("", "limitranges", "list"),
                                   ("scheduling.k8s.io", "priorityclasses", "list")],
                         ids=["pods-get-resolve", "limitranges-list-decide", "priorityclasses-list-cluster"])
def test_a_refused_read_is_answered_with_an_outcome(reactor_objects: list[dict[str, Any]], token_file: Path,
                                                    grant: tuple[str, str, str]) -> None:
    """A 403 is a PermanentError: answered 200 with `failed`/`api-error` outcomes naming the refusal, never an
    exception out of the webhook (CONTRIBUTING.md: PermanentError → counted, answered 200 with the reason)."""
    group, resource, verb = grant
    (role,) = {g[0] for g in _grants(reactor_objects) if g[1:] == grant}
    sim = _cluster(_without(reactor_objects, (role, group, resource, verb)))
    r = _reactor(sim, token_file)
    try:
        answer = EXPECTED[NEEDED_BY[grant][0]][0](r)
        assert answer.code == 200 and answer.results == {("failed", "api-error")}
        assert all(_forbidden_text(group, resource, verb) in o["detail"] for o in answer.outcomes)
    finally:
        r.service.kube.close()
        sim.stop()


# -- what the ServiceAccount can never do ------------------------------------------------------------


def _sa_client(sim: SimCluster) -> k8s.ApiClient:
    config = k8s.Configuration(host=sim.url)
    config.api_key = {"BearerToken": _sa_token(sim)}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(config)


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(ApiException) as info:
        call()
    assert info.value.status == 403, info.value.body
    return str(json.loads(info.value.body)["message"])


@pytest.mark.parametrize("namespace", ["gpu-reactor", NAMESPACE])
@pytest.mark.parametrize("secret", ["gpu-reactor-webhook-token", "gpu-reactor-state-key"])
def test_the_service_account_cannot_read_secrets(sim: SimCluster, namespace: str, secret: str) -> None:
    """Not the webhook token or the state key in its own namespace (both are mounted, never read through
    the API), not the workloads' Secrets."""
    sim.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": namespace},
               "stringData": {"token": "t"}})
    with _sa_client(sim) as c:
        core = k8s.CoreV1Api(c)
        message = _refused(lambda: core.read_namespaced_secret(secret, namespace))
        assert message == (f'secrets "{secret}" is forbidden: User "{SA_USER}" cannot get resource '
                           f'"secrets" in API group "" in the namespace "{namespace}"')
        _refused(lambda: core.list_namespaced_secret(namespace))
        _refused(lambda: core.list_secret_for_all_namespaces())


def test_the_service_account_cannot_touch_a_namespace_without_its_role_binding(sim: SimCluster) -> None:
    """other-team has no RoleBinding for the reactor: reading its pods and patching its workloads are refused."""
    team = "other-team"
    for body in (copy.deepcopy(sim.get("deployments", NAMESPACE, "llm-inference")),
                 copy.deepcopy(sim.get("statefulsets", NAMESPACE, "trainer")),
                 copy.deepcopy(sim.get("cronjobs", NAMESPACE, "nightly"))):
        body["metadata"] = {"name": body["metadata"]["name"], "namespace": team, "annotations": ENFORCE}
        sim.apply(body)
    sim.settle()
    patch = {"metadata": {"annotations": {"gpu-reactor.io/mode": "off"}}}
    with _sa_client(sim) as c:
        apps, batch, core = k8s.AppsV1Api(c), k8s.BatchV1Api(c), k8s.CoreV1Api(c)
        for call, resource, group in ((lambda: apps.patch_namespaced_deployment("llm-inference", team, patch), "deployments", "apps"),
                                      (lambda: apps.patch_namespaced_stateful_set("trainer", team, patch), "statefulsets", "apps"),
                                      (lambda: batch.patch_namespaced_cron_job("nightly", team, patch), "cronjobs", "batch")):
            assert _refused(call).endswith(f'cannot patch resource "{resource}" in API group "{group}" in the namespace "{team}"')
        _refused(lambda: core.list_namespaced_pod(team))
        _refused(lambda: apps.read_namespaced_deployment("llm-inference", team))
        _refused(lambda: apps.patch_namespaced_deployment("gpu-reactor", "gpu-reactor", patch))
    assert sim.get("deployments", team, "llm-inference")["metadata"]["annotations"]["gpu-reactor.io/mode"] == "enforce"
