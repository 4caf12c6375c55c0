"""The tests play the operators (they are not simulated): read the custom resource, create what the
operator would create (StatefulSet, Deployment or pods) with its controller reference, uid, labels and names,
and report status as the operator does. Each function builds its objects exactly as the operator's own code
builds them (issue 24): the upstream file and function are named on each, at the versions the README's
operators table names (kubeflow/notebooks v1.11.0, KServe v0.20.0, KubeRay v1.7.0, LWS v0.10.0, JobSet v0.12.0,
Knative Serving 1.23). Fields the reactor never reads (probes, env, volumes) are left out; names, labels,
annotations, ownerReferences and the fields each operator copies from its resource are not."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor.integrations.adapters.kmeta import child_name
from reactor_sim import SimCluster
from tests.support import NAMESPACE

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def install(sim: SimCluster, *files: str) -> None:
    for name in files:
        sim.load_manifests(CRDS / name)


SHARED_CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "crds"
needs_shared = pytest.mark.skipif(not SHARED_CRDS.is_dir(), reason=f"{SHARED_CRDS} is absent: the operators' real "
                                                                    "CRDs (../shared/crds) are needed for these tests")


@functools.cache
def _upstream_crd(name: str) -> Obj:
    doc: Obj = yaml.load((SHARED_CRDS / name).read_text(encoding="utf-8"),
                         Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return doc


def install_upstream(sim: SimCluster, *files: str) -> None:
    """The operators' real CRDs, verbatim (../shared/crds): every field the operator's API has, pruned and
    validated by its structural schema (the trimmed copies in tests/fixtures/crds keep only what the reactor
    reads). Tests using it carry `needs_shared`."""
    for name in files:
        sim.apply(copy.deepcopy(_upstream_crd(name)))


def container(name: str, gpus: int, image: str = "registry.example.com/app:1") -> Obj:
    return {"name": name, "image": image, "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}


def owner_ref(obj: Obj) -> list[Obj]:
    """controller-runtime controllerutil.SetControllerReference: controller and blockOwnerDeletion both true."""
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]


def custom(sim: SimCluster, plural: str, name: str) -> Obj:
    return sim.get(plural, NAMESPACE, name)


def set_status(sim: SimCluster, plural: str, name: str, status: Obj) -> None:
    """The operator's status write (a merge patch of the status subresource), as the cluster admin."""
    res = sim.registry.by_plural(plural)
    with sim.store.lock:
        sim.api.patch(res, NAMESPACE, name, "application/merge-patch+json", {"status": status}, subresource="status")


def template_of(pod_spec: Obj, labels: dict[str, str]) -> Obj:
    spec = {k: copy.deepcopy(v) for k, v in pod_spec.items()
            if k in ("containers", "priorityClassName", "restartPolicy")}
    return {"metadata": {"labels": labels}, "spec": spec}


def notebook_statefulset(nb: Obj) -> Obj:
    """kubeflow/notebooks v1.11.0 components/notebook-controller/controllers/notebook_controller.go
    generateStatefulSet: named as the Notebook, no labels or annotations of its own; 1 replica (0 with the
    `kubeflow-resource-stopped` annotation); selector `statefulset`; the pod template labelled `statefulset` and
    `notebook-name` plus every label of the Notebook, annotated with the Notebook's annotations whose key contains
    neither "kubectl" nor "notebook"; the first container gets workingDir /home/jovyan, the notebook-port 8888 and
    NB_PREFIX; the pod fsGroup 100 (ADD_FSGROUP unset)."""
    name, meta = nb["metadata"]["name"], nb["metadata"]
    spec = copy.deepcopy(nb["spec"]["template"]["spec"])
    first = spec["containers"][0]
    first.setdefault("workingDir", "/home/jovyan")
    first.setdefault("ports", [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}])
    first["env"] = [*first.get("env", []), {"name": "NB_PREFIX", "value": f"/notebook/{NAMESPACE}/{name}"}]
    spec.setdefault("securityContext", {"fsGroup": 100})
    labels = {"statefulset": name, "notebook-name": name, **(meta.get("labels") or {})}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if "kubectl" not in k and "notebook" not in k}
    replicas = 0 if "kubeflow-resource-stopped" in (meta.get("annotations") or {}) else 1
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": owner_ref(nb)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"statefulset": name}},
                     "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}}}


def reconcile_notebook(sim: SimCluster, name: str, *, settle: bool = True) -> None:
    """The notebook controller's Reconcile: create the StatefulSet of `notebook_statefulset`; on an existing one,
    reconcilehelper.CopyStatefulSetFields: its labels and annotations replaced by the generated ones (none), its
    replicas and pod template *spec* copied (the template's metadata is left as it was created)."""
    nb = custom(sim, "notebooks", name)
    desired = notebook_statefulset(nb)
    found = [s for s in sim.list("statefulsets", NAMESPACE) if s["metadata"]["name"] == name]
    if found:
        current = found[0]
        current["metadata"].pop("labels", None)
        current["metadata"].pop("annotations", None)
        current["spec"]["replicas"] = desired["spec"]["replicas"]
        current["spec"]["template"]["spec"] = desired["spec"]["template"]["spec"]
        desired = current
    sim.apply(desired)
    if settle:
        sim.settle()


def reconcile_isvc(sim: SimCluster, name: str, *, settle: bool = True, runtime: Obj | None = None) -> None:
    """KServe in raw deployment mode: a Deployment `<name>-<component>` with minReplicas pods for the predictor and
    for the transformer and explainer where the resource has them, each labelled `component`. `runtime`: the
    ServingRuntime KServe picked for the predictor's model (a ServingRuntime object; the reactor never reads it)."""
    isvc = custom(sim, "inferenceservices", name)
    canaries = isvc["spec"].get("canary") or []
    for component in ("predictor", "transformer", "explainer"):
        if component in isvc["spec"]:
            _isvc_component(sim, isvc, component, runtime, replicas=_stable_replicas(isvc) if canaries else None)
    for canary in canaries:
        _isvc_component(sim, canary_isvc(isvc, canary), "predictor", runtime)
    if isinstance(isvc["spec"]["predictor"].get("workerSpec"), dict):
        _isvc_workers(sim, isvc)
    if settle:
        sim.settle()
        generation = custom(sim, "inferenceservices", name)["metadata"]["generation"]
        status: Obj = {"observedGeneration": generation, "deploymentMode": "Standard",
                       "conditions": [{"type": "Ready", "status": "True"}]}
        if runtime is not None:  # components/predictor.go reconcileModel records the runtime it used
            status["servingRuntimeName"] = runtime["metadata"]["name"]
        set_status(sim, "inferenceservices", name, status)


# kserve v0.20.0 pkg/constants ServiceAnnotationDisallowedList: the InferenceService annotations KServe does not
# copy into the component's pod template; every other one it copies (components/predictor.go buildObjectMeta).
KSERVE_DISALLOWED = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/max-scale",
                     "internal.serving.kserve.io/storage-initializer-sourceuri",
                     "kubectl.kubernetes.io/last-applied-configuration", "serving.kserve.io/model-format")


def isvc_component_meta(isvc: Obj, component: str) -> tuple[str, Obj, Obj]:
    """kserve v0.20.0 components/predictor.go buildPredictorResources + buildObjectMeta (the transformer's and
    explainer's alike): (the component's name, its labels, its annotations): the InferenceService's labels, the
    component's own, `serving.kserve.io/inferenceservice` and `component`; the InferenceService's annotations but
    the disallow list, and the component's own."""
    meta, spec = isvc["metadata"], isvc["spec"][component]
    variant = spec.get("name") if component == "predictor" else None
    name = f"{meta['name']}-{variant}-{component}" if variant else f"{meta['name']}-{component}"
    labels = {**(meta.get("labels") or {}), **(spec.get("labels") or {}),
              "serving.kserve.io/inferenceservice": meta["name"], "component": component}
    annotations = {k: v for k, v in {**(meta.get("annotations") or {}), **(spec.get("annotations") or {})}.items()
                   if k not in KSERVE_DISALLOWED}
    return name, labels, annotations


# kserve v0.20.0 pkg/apis/serving/v1beta1/predictor.go PredictorSpec.GetImplementations, in its order.
ISVC_IMPLEMENTATIONS = ("xgboost", "pytorch", "triton", "sklearn", "tensorflow", "onnx", "pmml", "lightgbm",
                        "paddle", "huggingface", "model")
RUNTIME_IMAGE = "kserve/huggingfaceserver:v0.14"


def merge_runtime_container(runtime: Obj, isvc_container: Obj) -> Obj:
    """kserve v0.20.0 controllers/v1beta1/inferenceservice/utils MergeRuntimeContainers: a strategic merge of the
    InferenceService's container over the runtime's — `resources.limits` and `requests` merged key by key, the
    InferenceService's value winning — and the args concatenated."""
    out = {**copy.deepcopy(runtime), **{k: copy.deepcopy(v) for k, v in isvc_container.items()
                                        if k not in ("resources", "args")}}
    resources = copy.deepcopy(runtime.get("resources") or {})
    for key, values in (isvc_container.get("resources") or {}).items():
        resources[key] = {**(resources.get(key) or {}), **values}
    out["resources"] = resources
    args = [*(runtime.get("args") or []), *(isvc_container.get("args") or [])]
    if args:
        out["args"] = args
    return out


def isvc_pod_spec(isvc: Obj, component: str, runtime: Obj | None = None) -> Obj:
    """kserve v0.20.0 components/predictor.go buildPredictorResources: with `model`, buildPodSpec merges the
    ServingRuntime's kserve-container under the model's container (MergeServingRuntimeAndInferenceServiceSpecs) and
    appends the predictor's other containers; with a framework field (`sklearn`, …: one the defaulting webhook did
    not move into `model`), the framework's own container (GetContainer: its inline Container, named
    kserve-container by Default) replaces the first of `containers`, or is the only one; a custom predictor is its
    `containers`. The transformer and explainer are their `containers`."""
    spec = copy.deepcopy(dict(isvc["spec"][component]))
    found = [f for f in ISVC_IMPLEMENTATIONS if f in spec] if component == "predictor" else []
    if not found:
        return spec
    inline = {k: v for k, v in spec[found[0]].items() if k in ("image", "resources", "args", "env")}
    own = {"name": "kserve-container", **inline}
    if found[0] == "model":
        served = (runtime or {}).get("spec", {}).get("containers") or [{"name": "kserve-container"}]
        base = next(c for c in served if c["name"] == "kserve-container")
        merged = merge_runtime_container({"image": RUNTIME_IMAGE, **base}, own)
        spec["containers"] = [merged, *spec.get("containers", [])]
    else:
        own.setdefault("image", f"kserve/{found[0]}server:v0.14")
        spec["containers"] = [own, *spec.get("containers", [])[1:]]
    return spec


def _canary_replicas(isvc: Obj, canary: Obj) -> int:
    """kserve v0.20.0 components/predictor.go canaryReplicaCount: the canary's minReplicas, else the stable
    predictor's minReplicas (1 unset) times trafficPercent, rounded up."""
    if canary["predictor"].get("minReplicas") is not None:
        return int(canary["predictor"]["minReplicas"])
    stable = int(isvc["spec"]["predictor"].get("minReplicas", 1))
    return -(-stable * int(canary["trafficPercent"]) // 100)


def _stable_replicas(isvc: Obj) -> int:
    """reconcileRawDeployment: with canaries, the stable predictor's minReplicas less theirs, at least 1."""
    stable = int(isvc["spec"]["predictor"].get("minReplicas", 1))
    return max(stable - sum(_canary_replicas(isvc, c) for c in isvc["spec"]["canary"]), 1)


def _mergo_override(dst: Any, src: Any) -> Any:
    """dario.cat/mergo Merge(dst, src, WithOverride) as buildCanaryPredictor calls it: structs and maps merged key
    by key, a non-empty value of src replacing dst's (a list replaced whole)."""
    if isinstance(dst, dict) and isinstance(src, dict):
        out = copy.deepcopy(dst)
        for key, value in src.items():
            out[key] = _mergo_override(out[key], value) if key in out else copy.deepcopy(value)
        return out
    return copy.deepcopy(src) if src not in (None, "", 0, [], {}) else dst


def canary_isvc(isvc: Obj, canary: Obj) -> Obj:
    """kserve v0.20.0 components/predictor.go reconcileCanaryDeployments + buildCanaryPredictor: the InferenceService
    with its predictor replaced by the stable one merged with the canary's, autoscaling fields zeroed and
    minReplicas the canary's count; built into a Deployment `<isvc>-<canary name>-predictor` like the stable one."""
    predictor = _mergo_override(isvc["spec"]["predictor"], canary["predictor"])
    for key in ("maxReplicas", "scaleTarget", "scaleMetric", "autoScaling"):
        predictor.pop(key, None)
    predictor["minReplicas"] = _canary_replicas(isvc, canary)
    return {**isvc, "spec": {**isvc["spec"], "predictor": predictor}}


def _isvc_workers(sim: SimCluster, isvc: Obj) -> None:
    """kserve v0.20.0 components/predictor.go reconcileWorker + multiNodeProcess (computeMpNodeAndGPUs: a node per
    pipeline stage, tensorParallelSize GPUs on each) and deployment_reconciler.go createRawWorkerDeployment: the
    workers' Deployment `<isvc>-predictor-worker` (PredictorWorkerServiceName), labelled as the predictor (with
    `isvc.generation`) and `app: isvc.<isvc>-predictor-worker`, pipelineParallelSize − 1 replicas, each
    `worker-container` with tensorParallelSize GPUs (addGPUResourceToDeployment), rolling 0% / 100%."""
    worker = isvc["spec"]["predictor"]["workerSpec"]
    tensor, pipeline = int(worker.get("tensorParallelSize", 1)), int(worker.get("pipelineParallelSize", 2))
    _, labels, annotations = isvc_component_meta(isvc, "predictor")
    name = f"{isvc['metadata']['name']}-predictor-worker"
    labels = {**labels, "isvc.generation": str(isvc["metadata"]["generation"]),
              "app": f"isvc.{isvc['metadata']['name']}-predictor-worker"}
    gpus = {"limits": {GPU: str(tensor)}, "requests": {GPU: str(tensor)}}
    containers = [{**copy.deepcopy(c), "resources": gpus} if c.get("name") == "worker-container" else copy.deepcopy(c)
                  for c in worker.get("containers") or [{"name": "worker-container", "image": RUNTIME_IMAGE}]]
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "annotations": annotations,
                            "ownerReferences": owner_ref(isvc)},
               "spec": {"replicas": pipeline - 1, "selector": {"matchLabels": {"app": labels["app"]}},
                        "strategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": "100%"}},
                        "template": {"metadata": {"labels": labels, "annotations": annotations},
                                     "spec": {"containers": containers}}}})


def _isvc_component(sim: SimCluster, isvc: Obj, component: str, runtime: Obj | None = None, *,
                    replicas: int | None = None) -> None:
    """kserve v0.20.0 reconcilers/deployment/deployment_reconciler.go createRawDefaultDeployment: the Deployment
    and its pod template share the component's metadata (one labels map: the `app: isvc.<name>` label lands on
    both), RollingUpdate 25%/25%; replicas are minReplicas (the HPA KServe makes keeps them there), or what
    `replicas` says (a stable predictor beside canaries)."""
    spec = isvc_pod_spec(isvc, component, runtime)
    name, labels, annotations = isvc_component_meta(isvc, component)
    labels["app"] = f"isvc.{name}"
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "annotations": annotations,
                            "ownerReferences": owner_ref(isvc)},
               "spec": {"replicas": int(spec.get("minReplicas", 1)) if replicas is None else replicas,
                        "selector": {"matchLabels": {"app": labels["app"]}},
                        "strategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                        "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                        "template": {"metadata": {"labels": labels, "annotations": annotations},
                                     "spec": template_of(spec, labels)["spec"]}}})


RECREATE_HASH = "ray.io/upgrade-strategy-recreate-hash"


def ray_pod_name(cluster: str, group: str, index: int) -> str:
    """kuberay v1.7.0 utils.PodName with generateName: `<cluster>-head-` / `<cluster>-<group>-worker-` (the prefix cut
    at 50 characters) and five generated characters, fixed here as the index (`00000`) so tests can name a pod."""
    prefix = (cluster[:50] + "-head") if group == "headgroup" else (f"{cluster}-{group}"[:50] + "-worker")
    return f"{prefix.lower()}-{index:05d}"


def _ray_hash(spec: Obj) -> str:
    """utils.GenerateHashWithoutReplicasAndWorkersToDelete: the spec without replicas, min/max, workersToDelete,
    tolerations, schedulingGates and upgradeStrategy (the JSON hash's form differs; only equality matters here)."""
    muted = copy.deepcopy(spec)
    muted.pop("upgradeStrategy", None)
    for group in [muted.get("headGroupSpec") or {}, *(muted.get("workerGroupSpecs") or [])]:
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        pod = (group.get("template") or {}).get("spec") or {}
        pod.pop("tolerations", None)
        pod.pop("schedulingGates", None)
    return hashlib.sha1(json.dumps(muted, sort_keys=True).encode()).hexdigest()[:16]


def reconcile_ray(sim: SimCluster, name: str) -> None:
    """KubeRay v1.7.0 raycluster_controller.go reconcilePods: the head pod and replicas × numOfHosts pods per worker
    group (GetWorkerGroupDesiredReplicas: clamped to min/maxReplicas), created directly with generateName
    (`ray_pod_name`), labelled as common/pod.go labelPod does and annotated with the cluster hash. A template
    change reaches running pods only with `upgradeStrategy.type: Recreate` (shouldRecreatePodsForUpgrade: the head
    pod's hash differs → every pod, head included, deleted at once, then created anew); otherwise KubeRay leaves
    them alone and only new pods get the new template. Status: `state: ready`, observedGeneration, conditions."""
    rc = custom(sim, "rayclusters", name)
    spec, digest = rc["spec"], _ray_hash(rc["spec"])
    pods = sim.list("pods", NAMESPACE, label_selector=f"ray.io/cluster={name}")
    heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    recreate = (spec.get("upgradeStrategy") or {}).get("type") == "Recreate"
    if recreate and heads and heads[0]["metadata"].get("annotations", {}).get(RECREATE_HASH) != digest:
        for pod in pods:
            sim.delete("pods", NAMESPACE, pod["metadata"]["name"])
        pods = []
    groups = [("headgroup", "head", spec["headGroupSpec"]["template"], 1)]
    for g in spec.get("workerGroupSpecs") or []:
        wanted = min(max(int(g.get("replicas", 0)), int(g.get("minReplicas", 0))), int(g.get("maxReplicas", 1 << 31)))
        groups.append((g["groupName"], "worker", g["template"], wanted * int(g.get("numOfHosts", 1))))
    existing = {p["metadata"]["name"] for p in pods}
    for group, node_type, template, count in groups:
        for i in range(count):
            pod_name = ray_pod_name(name, group, i)
            if pod_name in existing:
                continue
            labels = {**((template.get("metadata") or {}).get("labels") or {}), "ray.io/is-ray-node": "yes",
                      "ray.io/cluster": name, "ray.io/node-type": node_type, "ray.io/group": group,
                      "ray.io/identifier": f"{name}-{node_type}", "app.kubernetes.io/name": "kuberay",
                      "app.kubernetes.io/created-by": "kuberay-operator"}
            annotations = {**((template.get("metadata") or {}).get("annotations") or {}), RECREATE_HASH: digest,
                           "ray.io/kuberay-version": "v1.7.0"}
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod_name, "namespace": NAMESPACE, "labels": labels,
                                    "annotations": annotations, "ownerReferences": owner_ref(rc)},
                       "spec": template_of(template["spec"], labels)["spec"]})
    sim.settle()
    now = "2026-01-01T00:00:00Z"
    set_status(sim, "rayclusters", name,
               {"state": "ready", "observedGeneration": custom(sim, "rayclusters", name)["metadata"]["generation"],
                "conditions": [{"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReady",
                                "message": "", "lastTransitionTime": now},
                               {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                                "message": "", "lastTransitionTime": now}]})


LWS = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"


def _lws_pod_webhook(sim: SimCluster, pod: Obj, group: str, worker: str) -> None:
    """lws v0.10.0 pkg/webhooks/pod_webhook.go Default: each pod labelled with its group index, its worker index
    (its ordinal within the group) and the group's key (a hash of namespace, LWS and group)."""
    key = hashlib.sha1(f"{NAMESPACE}/{pod['metadata']['labels'][LWS]}-{group}".encode()).hexdigest()
    pod["metadata"]["labels"].update({LWS_GROUP: group, LWS_WORKER: worker, LWS_KEY: key})
    sim.apply(pod)


def lws_worker_statefulset(lws: Obj, leader: Obj, revision: str) -> Obj:
    """lws v0.10.0 pkg/controllers/pod_controller.go constructWorkerStatefulSetApplyConfiguration and
    setControllerReferenceWithStatefulSet: the group's workers' StatefulSet, named as the leader pod, controlled by it
    (blockOwnerDeletion), labelled with the LWS's labels plus group-index, name, group-key and revision (the leader
    pod's), annotated as the LWS; `size − 1` replicas from ordinal 1, Parallel, its selector group-index, name and
    group-key; its pod template the workerTemplate labelled alike and annotated with the size and the leader's
    name. Reconcile builds it only for a leader pod of an LWS whose size is above 1."""
    name, meta, tmpl = lws["metadata"]["name"], lws["metadata"], lws["spec"]["leaderWorkerTemplate"]
    size = int(tmpl.get("size", 1))
    group = leader["metadata"]["labels"][LWS_GROUP]
    labels = {LWS_GROUP: group, LWS: name, LWS_KEY: leader["metadata"]["labels"][LWS_KEY], LWS_REVISION: revision}
    worker_meta = copy.deepcopy(tmpl["workerTemplate"].get("metadata") or {})
    worker_meta["labels"] = {**(worker_meta.get("labels") or {}), **labels}
    worker_meta["annotations"] = {**(worker_meta.get("annotations") or {}),
                                  "leaderworkerset.sigs.k8s.io/size": str(size),
                                  "leaderworkerset.sigs.k8s.io/leader-name": leader["metadata"]["name"]}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": leader["metadata"]["name"], "namespace": NAMESPACE,
                         "labels": {**(meta.get("labels") or {}), **labels},
                         "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": owner_ref(leader)},
            "spec": {"replicas": size - 1, "serviceName": name, "podManagementPolicy": "Parallel",
                     "ordinals": {"start": 1},
                     "selector": {"matchLabels": {k: labels[k] for k in (LWS_GROUP, LWS, LWS_KEY)}},
                     "template": {"metadata": worker_meta,
                                  "spec": template_of(tmpl["workerTemplate"]["spec"], {})["spec"]}}}


def reconcile_lws(sim: SimCluster, name: str) -> None:
    """lws v0.10.0 pkg/controllers/leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration: the
    leaders' StatefulSet named as the LWS (labels: the LWS's plus name and revision; annotations: the LWS's plus
    the replicas one), one leader per group, selector name + worker-index 0, Parallel; its pod template the
    leaderTemplate (else workerTemplate) labelled worker-index 0, name, revision and annotated with the group
    size. pod_controller.go Reconcile: per leader pod its workers' StatefulSet (`lws_worker_statefulset`), none
    where the size is 1 (it returns before building one)."""
    lws = custom(sim, "leaderworkersets", name)
    meta, tmpl = lws["metadata"], lws["spec"]["leaderWorkerTemplate"]
    revision = hashlib.sha1(json.dumps(tmpl, sort_keys=True).encode()).hexdigest()[:10]
    leader_template = copy.deepcopy(tmpl.get("leaderTemplate") or tmpl["workerTemplate"])
    size = int(tmpl.get("size", 1))
    leader_meta = leader_template.setdefault("metadata", {})
    leader_meta["labels"] = {**(leader_meta.get("labels") or {}), LWS_WORKER: "0", LWS: name, LWS_REVISION: revision}
    leader_meta["annotations"] = {**(leader_meta.get("annotations") or {}),
                                  "leaderworkerset.sigs.k8s.io/size": str(size)}
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": NAMESPACE,
                            "labels": {**(meta.get("labels") or {}), LWS: name, LWS_REVISION: revision},
                            "annotations": {**(meta.get("annotations") or {}),
                                            "leaderworkerset.sigs.k8s.io/replicas":
                                                str(lws["spec"].get("replicas", 1))},
                            "ownerReferences": owner_ref(lws)},
               "spec": {"replicas": int(lws["spec"].get("replicas", 1)), "serviceName": name,
                        "podManagementPolicy": "Parallel",
                        "selector": {"matchLabels": {LWS: name, LWS_WORKER: "0"}},
                        "template": {"metadata": leader_meta,
                                     "spec": template_of(leader_template["spec"], {})["spec"]}}})
    sim.settle()
    for leader in sim.list("pods", NAMESPACE, label_selector=f"{LWS},{LWS_WORKER}=0"):
        if leader["metadata"]["labels"][LWS] != name:
            continue
        group = leader["metadata"]["name"].rsplit("-", 1)[1]
        if LWS_GROUP not in leader["metadata"]["labels"]:
            _lws_pod_webhook(sim, leader, group, "0")
            leader = sim.get("pods", NAMESPACE, leader["metadata"]["name"])
        if size == 1:  # pod_controller.go Reconcile: "Once size = 1, no need to create worker statefulSets."
            continue
        sim.apply(lws_worker_statefulset(lws, leader, revision))
    sim.settle()
    for worker in sim.list("pods", NAMESPACE, label_selector=f"{LWS}={name},!{LWS_WORKER}"):
        ordinal = worker["metadata"]["name"].rsplit("-", 1)[1]
        _lws_pod_webhook(sim, worker, worker["metadata"]["labels"][LWS_GROUP], ordinal)


RAY_ORIGIN = {"ray.io/originated-from-crd": "RayService"}


def ray_service_cluster(sim: SimCluster, service: str, suffix: str) -> str:
    """KubeRay v1.7.0 rayservice_controller.go constructRayClusterForRayService: a RayCluster named
    utils.GenerateRayClusterName (`<service>-<five generated characters>`, `suffix` here) built from
    rayClusterConfig, controlled by the RayService and labelled with its name and kind; KubeRay's RayCluster
    controller makes its pods. Returns the cluster's name."""
    svc = custom(sim, "rayservices", service)
    name = f"{service}-{suffix}"
    sim.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": owner_ref(svc),
                            "labels": {"ray.io/originated-from-cr-name": service, **RAY_ORIGIN}},
               "spec": copy.deepcopy(svc["spec"]["rayClusterConfig"])})
    reconcile_ray(sim, name)
    return name


def ray_service_status(sim: SimCluster, service: str, active: str, pending: str = "") -> None:
    """The RayService's status as KubeRay writes it: the active (and pending) cluster, UpgradeInProgress while a
    pending one exists, Ready, and the generation it observed."""
    generation = custom(sim, "rayservices", service)["metadata"]["generation"]
    now = "2026-01-01T00:00:00Z"
    upgrading = {"type": "UpgradeInProgress", "status": "True" if pending else "False", "lastTransitionTime": now,
                 "reason": "BothActivePendingClustersExist" if pending else "NoPendingCluster", "message": ""}
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": now, "reason": "NonZeroServeEndpoints",
             "message": ""}
    set_status(sim, "rayservices", service,
               {"observedGeneration": generation, "conditions": [ready, upgrading],
                "activeServiceStatus": {"rayClusterName": active},
                "pendingServiceStatus": {"rayClusterName": pending or None}})  # null: a merge patch removes it


def kueue_deployment_webhook(sim: SimCluster, name: str) -> None:
    """kueue v0.19.2 pkg/controller/jobs/deployment/deployment_webhook.go Default, for a Deployment Kueue manages:
    the pod template gets the suspended-by-parent annotation, managed-by, the queue-name and the priority-class
    labels of the Deployment (so a change of the priority label changes the template)."""
    dep = sim.get("deployments", NAMESPACE, name)
    labels = dep["metadata"].get("labels") or {}
    template = dep["spec"]["template"].setdefault("metadata", {})
    template.setdefault("annotations", {})["kueue.x-k8s.io/pod-suspending-parent"] = "deployment"
    copied = {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": labels["kueue.x-k8s.io/queue-name"]}
    if labels.get("kueue.x-k8s.io/priority-class"):
        copied["kueue.x-k8s.io/priority-class"] = labels["kueue.x-k8s.io/priority-class"]
    template.setdefault("labels", {}).update(copied)
    sim.apply(dep)
    sim.settle()


def kueue_statefulset_webhook(sim: SimCluster, name: str, release: tuple[int, int, int]) -> None:
    """Kueue's pkg/controller/jobs/statefulset/statefulset_webhook.go `Webhook.Default` for a StatefulSet it manages
    (queue-name set: `WorkloadShouldBeSuspended`), by release, as read at each tag:
    - v0.15.0–0.15.5 and v0.16.0–0.16.1: the pod template gets the labels `managed`, `pod-group-name`
      (`GetWorkloadName`), `queue-name` and, where the StatefulSet has one, `priority-class` (so a change of it
      changes the template and restarts every pod), and the annotations `pod-suspending-parent: statefulset`,
      `pod-group-total-count` (replicas, default 1), `pod-group-fast-admission`, `pod-group-serving` and
      `pod-group-pod-index-label: apps.kubernetes.io/pod-index`;
    - v0.15.6+ and v0.16.2+: no template label at all, only the annotations `pod-suspending-parent` and
      `pod-group-pod-index-label` (the priority-class label then stays on the StatefulSet:
      statefulset_reconciler.go reconcileWorkload reads it for nothing running)."""
    sts = sim.get("statefulsets", NAMESPACE, name)
    labels = sts["metadata"].get("labels") or {}
    template = sts["spec"]["template"].setdefault("metadata", {})
    annotations = template.setdefault("annotations", {})
    annotations.update({"kueue.x-k8s.io/pod-suspending-parent": "statefulset",
                        "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index"})
    if (0, 15, 0) <= release <= (0, 15, 5) or (0, 16, 0) <= release <= (0, 16, 1):
        copied = {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/pod-group-name": kueue_statefulset_workload(name),
                  "kueue.x-k8s.io/queue-name": labels["kueue.x-k8s.io/queue-name"]}
        if labels.get("kueue.x-k8s.io/priority-class"):
            copied["kueue.x-k8s.io/priority-class"] = labels["kueue.x-k8s.io/priority-class"]
        template.setdefault("labels", {}).update(copied)
        annotations.update({"kueue.x-k8s.io/pod-group-total-count": str(sts["spec"].get("replicas", 1)),
                            "kueue.x-k8s.io/pod-group-fast-admission": "true",
                            "kueue.x-k8s.io/pod-group-serving": "true"})
    sim.apply(sts)
    sim.settle()


def kueue_statefulset_workload(name: str) -> str:
    """statefulset_webhook.go GetWorkloadName: jobframework/workload_names.go generateWorkloadName for the
    StatefulSet GVK and an empty uid (not known before creation): `statefulset-<name>-` and the first 5 hex digits
    of sha1("StatefulSet\\napps\\n<name>\\n")."""
    digest = hashlib.sha1(f"StatefulSet\napps\n{name}\n".encode()).hexdigest()
    return f"statefulset-{name}"[:252 - 5] + "-" + digest[:5]


JOBSET = "jobset.sigs.k8s.io/jobset-name"
JOBSET_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"


def reconcile_jobset(sim: SimCluster, name: str) -> None:
    """The JobSet controller (jobset v0.12.0 pkg/controllers/jobset_controller.go constructJob and
    labelAndAnnotateObject): `replicas` Jobs `<jobset>-<replicatedJob>-<index>` (placement.GenJobName) per
    replicatedJob, controlled by the JobSet, the Job and its pod template labelled and annotated alike with the
    JobSet's name, the replicatedJob's name and replicas, the restart attempt (status.restarts), the job index and
    the job key (jobHashKey: sha1 of `<namespace>/<job>`); the Job controller makes their pods."""
    js = custom(sim, "jobsets", name)
    attempt = str((js.get("status") or {}).get("restarts") or 0)
    for rjob in js["spec"]["replicatedJobs"]:
        for index in range(int(rjob.get("replicas", 1))):
            job = f"{name}-{rjob['name']}-{index}"
            labels = {JOBSET: name, JOBSET_RJOB: rjob["name"], "jobset.sigs.k8s.io/restart-attempt": attempt,
                      "jobset.sigs.k8s.io/replicatedjob-replicas": str(int(rjob.get("replicas", 1))),
                      "jobset.sigs.k8s.io/job-index": str(index),
                      "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{NAMESPACE}/{job}".encode()).hexdigest()}
            spec = copy.deepcopy(rjob["template"]["spec"])
            template_meta = spec["template"].setdefault("metadata", {})
            template_meta.setdefault("labels", {}).update(labels)
            template_meta.setdefault("annotations", {}).update(labels)
            sim.apply({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": job, "namespace": NAMESPACE, "labels": labels,
                                    "annotations": dict(labels), "ownerReferences": owner_ref(js)},
                       "spec": spec})
    sim.settle()


KNATIVE = "serving.knative.dev"
ISVC_LABEL = "serving.kserve.io/inferenceservice"


def reconcile_isvc_serverless(sim: SimCluster, name: str, *, ready: bool = True,
                              not_ready: tuple[str, ...] = ()) -> None:
    """KServe in serverless mode (its default) and Knative Serving under it: per component a Knative Service
    `<name>-<component>` controlled by the InferenceService; Knative's Configuration, a Revision per generation of
    it, and the Revision's Deployment `<revision>-deployment`; an older Revision, no longer routed, scales to zero.
    `ready=False`: the newest Revision of every component is created but not ready yet; `not_ready`: the components
    for which that is so (status as KServe and Knative report it)."""
    isvc = custom(sim, "inferenceservices", name)
    components, readiness = {}, {}
    for component in ("predictor", "transformer", "explainer"):
        if component in isvc["spec"]:
            readiness[component] = ready and component not in not_ready
            components[component] = _knative_component(sim, isvc, component, readiness[component])
    sim.settle()
    generation = custom(sim, "inferenceservices", name)["metadata"]["generation"]
    statuses = {}
    for component, (service, created, previous) in components.items():
        up = readiness[component]
        ready_condition = {"type": "Ready", "status": "True" if up else "False",
                           **({} if up else {"reason": "RevisionMissing", "message": "revision not ready"})}
        latest_ready = created if up else previous
        ksvc = sim.get(f"services.{KNATIVE}", NAMESPACE, service)
        set_status(sim, f"services.{KNATIVE}", service,
                   {"observedGeneration": ksvc["metadata"]["generation"], "conditions": [ready_condition],
                    "latestCreatedRevisionName": created, "latestReadyRevisionName": latest_ready,
                    "traffic": ksvc["spec"]["traffic"]})
        # kserve v0.20.0 inference_service_status.go PropagateStatus: a revision counts as rolled out once the
        # latest-revision route sends it 100%; under a canary split the last rolled-out one stays.
        latest_share = next(t["percent"] for t in ksvc["spec"]["traffic"] if t.get("latestRevision"))
        rolled = latest_ready if latest_share == 100 else _rolled_out(isvc, component)
        statuses[component] = {"latestCreatedRevision": created, "latestReadyRevision": latest_ready,
                               "latestRolledoutRevision": rolled}
    set_status(sim, "inferenceservices", name, {"observedGeneration": generation, "components": statuses,
                                                "deploymentMode": "Knative",
                                                "conditions": isvc_conditions(readiness)})


def isvc_conditions(readiness: dict[str, bool]) -> list[Obj]:
    """The InferenceService's conditions as KServe v0.20.0 sets them from its components' Knative Services:
    inference_service_status.go PropagateStatus sets `<Component>Ready` from each one's Ready (readyConditionsMap);
    ingress_reconciler.go createIngress leaves IngressReady False while the predictor, then the transformer, then the
    explainer is not ready ("<Component> ingress not created"); `Ready` is the living condition set of PredictorReady
    and IngressReady (conditionSet): every one of them True."""
    types = {"predictor": "PredictorReady", "transformer": "TransformerReady", "explainer": "ExplainerReady"}
    conditions: list[Obj] = [{"type": types[c], "status": "True" if up else "False",
                              **({} if up else {"reason": "RevisionMissing", "message": "revision not ready"})}
                             for c, up in readiness.items()]
    down = next((c for c in types if c in readiness and not readiness[c]), None)
    ingress: Obj = {"type": "IngressReady", "status": "True"} if down is None else {
        "type": "IngressReady", "status": "False", "reason": f"{down.capitalize()} ingress not created"}
    ready = readiness.get("predictor", False) and down is None
    conditions += [ingress, {"type": "Ready", "status": "True" if ready else "False",
                             **({} if ready else {"reason": ingress.get("reason") or "PredictorNotReady"})}]
    return conditions


def _rolled_out(isvc: Obj, component: str) -> str:
    return str(((isvc.get("status") or {}).get("components") or {}).get(component, {}).get("latestRolledoutRevision")
               or "")


def ksvc_traffic(isvc: Obj, component: str) -> list[Obj]:
    """kserve v0.20.0 reconcilers/knative/ksvc_reconciler.go NewKsvcReconciler: with canaryTrafficPercent set and a
    revision already rolled out, the latest revision gets that percent and the last rolled-out one (tag `prev`) the
    rest; otherwise the latest revision gets 100 (blue-green)."""
    percent, rolled = isvc["spec"][component].get("canaryTrafficPercent"), _rolled_out(isvc, component)
    if percent is None or not rolled:
        return [{"latestRevision": True, "percent": 100}]
    traffic: list[Obj] = [{"latestRevision": True, "percent": percent}]
    if percent < 100:
        traffic.append({"revisionName": rolled, "latestRevision": False, "percent": 100 - percent, "tag": "prev"})
    return traffic


def _knative_component(sim: SimCluster, isvc: Obj, component: str, ready: bool) -> tuple[str, str, str]:
    """kserve v0.20.0 reconcilers/knative/ksvc_reconciler.go: the Knative Service's template carries the component's
    metadata (`isvc_component_meta`: the InferenceService's annotations but the disallow list) and the autoscaling
    annotations from min/maxReplicas, so a changed annotation makes a new Revision. Returns (Knative Service, its
    newest Revision, the Revision before it or ""); the older Revisions keep
    their pods until the newest is ready."""
    name = isvc["metadata"]["name"]
    spec = isvc_pod_spec(isvc, component)
    _, labels, copied = isvc_component_meta(isvc, component)
    scale = {**copied, "autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev",
             "autoscaling.knative.dev/min-scale": str(spec.get("minReplicas", 1)),
             **({"autoscaling.knative.dev/max-scale": str(spec["maxReplicas"])} if spec.get("maxReplicas") else {})}
    template = {"metadata": {"labels": labels, "annotations": scale}, "spec": template_of(spec, labels)["spec"]}
    service = f"{name}-{component}"
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Service",
               "metadata": {"name": service, "namespace": NAMESPACE, "labels": labels,
                            "ownerReferences": owner_ref(isvc)},
               "spec": {"template": template, "traffic": ksvc_traffic(isvc, component)}})
    ksvc = sim.get(f"services.{KNATIVE}", NAMESPACE, service)
    service_labels = {**labels, f"{KNATIVE}/service": service, f"{KNATIVE}/serviceUID": ksvc["metadata"]["uid"]}
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Configuration",
               "metadata": {"name": service, "namespace": NAMESPACE, "labels": service_labels,
                            "ownerReferences": owner_ref(ksvc)},
               "spec": {"template": copy.deepcopy(template)}})
    config = custom(sim, "configurations", service)
    generation = config["metadata"]["generation"]
    # configuration/resources/revision.go MakeRevision: kmeta.ChildName(configuration, "-%05d" of its generation)
    revision = child_name(service, f"-{generation:05d}")
    previous = child_name(service, f"-{generation - 1:05d}") if generation > 1 else ""
    if not [r for r in sim.list("revisions", NAMESPACE) if r["metadata"]["name"] == revision]:
        _revision(sim, config, revision, template)
    older = [] if not ready else sim.list("deployments", NAMESPACE, label_selector=f"{KNATIVE}/configuration={service}")
    routed = {t.get("revisionName") for t in ksvc_traffic(isvc, component)} - {None}
    for dep in older:
        if dep["metadata"]["labels"][f"{KNATIVE}/revision"] not in (revision, *routed) and dep["spec"]["replicas"]:
            dep["spec"]["replicas"] = 0  # a Revision no route sends traffic to scales to zero
            sim.apply(dep)
    return service, revision, previous


def _revision(sim: SimCluster, config: Obj, revision: str, template: Obj) -> None:
    """Knative's Revision of the Configuration's generation, and its Deployment (min-scale replicas) named
    kmeta.ChildName(revision, "-deployment") (revision/resources/names Deployment)."""
    meta = config["metadata"]
    labels = {**template["metadata"]["labels"], f"{KNATIVE}/configuration": meta["name"],
              f"{KNATIVE}/configurationGeneration": str(meta["generation"]),
              f"{KNATIVE}/configurationUID": meta["uid"], f"{KNATIVE}/routingState": "active",
              f"{KNATIVE}/service": meta["labels"][f"{KNATIVE}/service"],
              f"{KNATIVE}/serviceUID": meta["labels"][f"{KNATIVE}/serviceUID"]}
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Revision",
               "metadata": {"name": revision, "namespace": NAMESPACE, "labels": labels,
                            "annotations": dict(template["metadata"]["annotations"]),
                            "ownerReferences": owner_ref(config)},
               "spec": copy.deepcopy(template["spec"])})
    rev = custom(sim, "revisions", revision)
    pod_labels = {**labels, f"{KNATIVE}/revision": revision, f"{KNATIVE}/revisionUID": rev["metadata"]["uid"],
                  "app": revision}
    replicas = int(template["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"])
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": child_name(revision, "-deployment"), "namespace": NAMESPACE, "labels": pod_labels,
                            "ownerReferences": owner_ref(rev)},
               "spec": {"replicas": replicas,
                        "selector": {"matchLabels": {f"{KNATIVE}/revisionUID": rev["metadata"]["uid"]}},
                        "template": {"metadata": {"labels": pod_labels}, "spec": copy.deepcopy(template["spec"])}}})
