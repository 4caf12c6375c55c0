"""The built-in adapters, each following its operator's published CRD (tests/fixtures/crds).

Kubeflow Notebook v1: one pod template at spec.template.spec, run by a StatefulSet the notebook
controller creates (no replicas of its own). KServe InferenceService v1beta1: the predictor is a
pod spec (spec.predictor.containers, priorityClassName) with minReplicas/maxReplicas; in raw
deployment mode KServe runs it as a Deployment, in serverless mode as a Knative Service (knative.py).
RayCluster v1: the head template and each worker group's template and replicas; KubeRay creates the
pods itself, labelled `ray.io/group`.
LeaderWorkerSet v1: the leader and worker templates, `replicas` groups; the leader StatefulSet is the
LWS's, each group's worker StatefulSet is its leader pod's (a hop the adapter declares). RayService v1:
the same templates under spec.rayClusterConfig, reached through the RayCluster KubeRay builds from it.
JobSet v1alpha2: pods → Job → JobSet, each replicatedJob a part; its webhook forbids every change the
reactor makes but a Kueue priority label (see `_jobset_forbidden`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.integrations.adapters import knative, naming
from reactor.integrations.adapters.base import Adapter, Obj, Part, read

RAY_HEAD = naming.RAY_HEAD  # KubeRay's ray.io/group label value on the head pod


def _notebook_parts(obj: Obj) -> tuple[Part, ...]:
    return (Part("", ("spec", "template", "spec"), default_replicas=1),)


ISVC_COMPONENTS = naming.ISVC_COMPONENTS  # KServe's `component` label on each one's pods
# kserve v0.20.0 pkg/apis/serving/v1beta1/predictor.go PredictorSpec.GetImplementations: the framework fields, in
# the order KServe looks for them, then `model`; a plain `containers` list (custom predictor) comes after.
ISVC_IMPLEMENTATIONS = ("xgboost", "pytorch", "triton", "sklearn", "tensorflow", "onnx", "pmml", "lightgbm",
                        "paddle", "huggingface", "model")


def isvc_implementations(obj: Obj) -> tuple[str, ...]:
    """The predictor's implementation fields present (PredictorSpec.GetImplementations, containers aside)."""
    predictor = read(obj, ("spec", "predictor"))
    if not isinstance(predictor, Mapping):
        return ()
    return tuple(f for f in ISVC_IMPLEMENTATIONS if isinstance(predictor.get(f), Mapping))


def _isvc_parts(obj: Obj) -> tuple[Part, ...]:
    """The predictor, and the transformer and explainer where the resource has them: each a pod spec with
    min/maxReplicas (v1beta1 ComponentExtensionSpec). KServe runs the predictor's implementation (`model`, or a
    framework field such as `sklearn`: each a PredictorExtensionSpec with an inline container) as kserve-container
    (components/predictor.go buildPredictorResources); a custom predictor is its `containers` list."""
    parts = []
    implementations = isvc_implementations(obj)
    for name in ISVC_COMPONENTS:
        if name != "predictor" and not isinstance(read(obj, ("spec", name)), Mapping):
            continue
        model = None
        if name == "predictor" and implementations:
            model = ("kserve-container", ("spec", "predictor", implementations[0]))
        parts.append(Part(name, ("spec", name), ("spec", name, "minReplicas"), ("spec", name, "maxReplicas"),
                          model=model))
    return tuple(parts)


def _ray_parts(obj: Obj, base: tuple[str, ...] = ("spec",)) -> tuple[Part, ...]:
    """The head and each worker group; a group's replica is `numOfHosts` pods (kuberay v1.7.0 utils
    GetWorkerGroupDesiredReplicas: replicas × numOfHosts), kept between minReplicas and maxReplicas."""
    head = Part(RAY_HEAD, (*base, "headGroupSpec", "template", "spec"), default_replicas=1)
    groups = read(obj, (*base, "workerGroupSpecs")) or []
    workers = tuple(
        Part(str(g.get("groupName", "")), (*base, "workerGroupSpecs", i, "template", "spec"),
             (*base, "workerGroupSpecs", i, "replicas"), (*base, "workerGroupSpecs", i, "maxReplicas"),
             default_replicas=0, pods=_positive(g.get("numOfHosts")),
             min_replicas_path=(*base, "workerGroupSpecs", i, "minReplicas"))
        for i, g in enumerate(groups) if isinstance(g, Mapping)
    )
    return (head, *workers)


def _positive(raw: Any, default: int = 1) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else default


def child_rollout(child: Obj | None) -> str:
    """Why the Deployment or StatefulSet an operator runs is still rolling out ("" when it is not)."""
    if child is None:
        return ""
    meta, spec, status = child.get("metadata") or {}, child.get("spec") or {}, child.get("status") or {}
    generation, observed = int(meta.get("generation", 0)), int(status.get("observedGeneration", 0))
    if observed < generation:
        return f"{child.get('kind')} {meta.get('name')}: generation {generation} observed {observed}"
    replicas, updated = int(spec.get("replicas", 1)), int(status.get("updatedReplicas", 0))
    if updated < replicas:
        return f"{child.get('kind')} {meta.get('name')}: {updated} of {replicas} replicas updated"
    revision = status.get("updateRevision")
    if revision and status.get("currentRevision") not in (None, revision):
        return f"{child.get('kind')} {meta.get('name')}: revision {revision} not yet current"
    return ""


def _observed_behind(obj: Obj) -> str:
    generation = int((obj.get("metadata") or {}).get("generation", 0))
    observed = (obj.get("status") or {}).get("observedGeneration")
    if isinstance(observed, int) and observed < generation:
        return f"the operator observed generation {observed} of {generation}"
    return ""


def _not_ready(obj: Obj) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready" and condition.get("status") != "True":
            return f"Ready is {condition.get('status')}: {condition.get('reason', '')} {condition.get('message', '')}"
    return ""


def _notebook_rollout(obj: Obj, child: Obj | None) -> str:
    return child_rollout(child)


def _isvc_rollout(obj: Obj, child: Obj | None) -> str:
    """Raw deployment mode: the component's Deployment; serverless mode: its Knative revisions (knative.py)."""
    # Not the resource's status.observedGeneration: KServe copies the Deployment's (or Knative Service's) own
    # counter there (PropagateRawStatus / PropagateStatus), unrelated to the InferenceService's generation.
    behind = _not_ready(obj)
    if behind or child is None:
        return behind
    return knative.rollout(obj, child) if knative.is_service(child) else child_rollout(child)


def _ray_rollout(obj: Obj, child: Obj | None) -> str:
    state: Any = (obj.get("status") or {}).get("state")
    behind = _observed_behind(obj)
    if behind:
        return behind
    for condition in read(obj, ("status", "conditions")) or []:  # v1.7 conditions; `state` is deprecated
        if isinstance(condition, Mapping) and condition.get("type") in ("RayClusterProvisioned", "HeadPodReady") \
                and condition.get("status") == "False":
            return f"{condition.get('type')} is False: {condition.get('reason', '')}".strip()
    return f"the RayCluster's state is {state!r}, not 'ready'" if state not in (None, "ready") else ""


RECREATE_WHY = ("KubeRay recreates a RayCluster's pods for a template change only with spec.upgradeStrategy.type "
                "Recreate (v1.7.0 raycluster_controller shouldRecreatePodsForUpgrade); without it the change is "
                "written and no running pod ever gets it")


def _ray_forbidden(obj: Obj) -> dict[str, str]:
    """What KubeRay never carries to a running RayCluster's pods: a template change without `upgradeStrategy.type:
    Recreate` (and with it, every pod, head included, is deleted at once: the README says so), and replicas the
    in-tree autoscaler owns (it writes `replicas` itself)."""
    out: dict[str, str] = {}
    if read(obj, ("spec", "upgradeStrategy", "type")) != "Recreate":
        out.update({field: RECREATE_WHY for field in TEMPLATE_FIELDS})
    if read(obj, ("spec", "enableInTreeAutoscaling")) is True:
        out["scale-replicas"] = ("enableInTreeAutoscaling is true: the Ray autoscaler writes the worker groups' "
                                 "replicas and would overwrite the reactor's")
    return out


TEMPLATE_FIELDS = ("resize-gpu", "set-priority", "resize-cpu", "resize-memory")


# The notebook controller labels only the pod template (generateStatefulSet): no owner label on the StatefulSet.
NOTEBOOK = Adapter("Notebook", "kubeflow.org", "v1", "notebooks", frozenset({"StatefulSet"}), _notebook_parts,
                   rollout=_notebook_rollout, names_child=naming.notebook)


ISVC_FIELDS = (*TEMPLATE_FIELDS, "scale-replicas")


def isvc_mode(obj: Obj) -> str:
    """KServe's deployment mode for the resource: kserve v0.20.0 controllers/v1beta1/inferenceservice/utils
    GetDeploymentMode: status.deploymentMode first, then the serving.kserve.io/deploymentMode annotation (legacy
    RawDeployment read as Standard, Serverless as Knative); "" where neither says (the cluster's default)."""
    raw = read(obj, ("status", "deploymentMode")) or \
        ((obj.get("metadata") or {}).get("annotations") or {}).get("serving.kserve.io/deploymentMode")
    return {"RawDeployment": "Standard", "Serverless": "Knative"}.get(str(raw or ""), str(raw or ""))


def _isvc_part_forbidden(obj: Obj, part: Part, gpu_resource: str) -> dict[str, str]:
    """What KServe v0.20.0 would not carry to the component's pods the way the reactor's plan says, per part:

    - a multi-node predictor (`workerSpec`): createRawDeployment sets the head's and the workers' GPUs from the
      tensor and pipeline parallelism sizes (addGPUResourceToDeployment) and the worker Deployment's replicas
      itself (createRawWorkerDeployment); a priority would reach the head only;
    - `spec.canary` (Standard mode): reconcileCanaryDeployments builds every canary Deployment from the stable
      predictor merged with the canary's (buildCanaryPredictor) and splits minReplicas with them
      (canaryReplicaCount): a predictor change lands on the canaries too, which the reactor does not model;
    - `canaryTrafficPercent` below 100 in Knative mode once a revision has rolled out: ksvc_reconciler.go
      NewKsvcReconciler keeps the last rolled-out revision serving the rest of the traffic with the old template,
      so the change reaches only the canary revision and both revisions hold GPUs until someone promotes it;
    - more than one implementation: KServe's webhook refuses it (validateExactlyOneImplementation);
    - a `model` (or framework field) without the GPU: KServe merges the ServingRuntime's kserve-container under it
      (utils MergeServingRuntimeAndInferenceServiceSpecs / MergeRuntimeContainers), so the pods' GPUs are the
      runtime's; one written here would override the runtime's and a revert could not restore it."""
    name = part.name
    if name == "predictor":
        if isinstance(read(obj, ("spec", "predictor", "workerSpec")), Mapping):
            why = ("a multi-node predictor (spec.predictor.workerSpec): KServe sets its head's and workers' GPUs "
                   "from the tensor and pipeline parallelism sizes and the workers' replicas itself "
                   "(createRawDeployment), over what the spec says")
            return {f: why for f in ISVC_FIELDS}
        canaries = read(obj, ("spec", "canary"))
        if isinstance(canaries, list) and canaries:
            named = ", ".join(str(read(c, ("predictor", "name")) or "?") for c in canaries)
            why = (f"it has canaries (spec.canary: {named}): KServe builds each canary Deployment from the predictor "
                   f"merged with the canary's and splits minReplicas with them (components/predictor.go "
                   f"buildCanaryPredictor, canaryReplicaCount), so a predictor change also changes the canaries; "
                   f"promote or remove them first")
            return {f: why for f in ISVC_FIELDS}
    percent = read(obj, ("spec", name, "canaryTrafficPercent"))
    rolled = read(obj, ("status", "components", name, "latestRolledoutRevision"))
    if isinstance(percent, int) and percent < 100 and rolled and isvc_mode(obj) not in ("Standard", "ModelMesh"):
        why = (f"the {name} has canaryTrafficPercent {percent}: KServe routes only {percent}% to the new Knative "
               f"revision and keeps revision {rolled} serving the rest with the old template (ksvc_reconciler.go "
               f"NewKsvcReconciler), so the change would reach only the canary while both revisions hold GPUs; "
               f"promote it (canaryTrafficPercent 100 or unset) first")
        return {f: why for f in ISVC_FIELDS}
    if name != "predictor":
        return {}
    implementations = isvc_implementations(obj)
    if len(implementations) > 1:
        why = (f"the predictor sets {' and '.join(implementations)}: KServe's webhook refuses more than one "
               f"implementation (validateExactlyOneImplementation)")
        return {f: why for f in ISVC_FIELDS}
    if implementations and part.model is not None:
        resources = read(obj, (*part.model[1], "resources")) or {}
        declared = any(isinstance(resources.get(k), Mapping) and gpu_resource in resources[k]
                       for k in ("limits", "requests"))
        if not declared:
            runtime = (read(obj, ("status", "servingRuntimeName")) or read(obj, ("status", "clusterServingRuntimeName"))
                       or read(obj, (*part.model[1], "runtime")) or "the one KServe selects for its model format")
            return {"resize-gpu": f"the predictor's {implementations[0]} sets no {gpu_resource}: its GPUs come from "
                                  f"ServingRuntime {runtime} (KServe merges the runtime's kserve-container under it, "
                                  f"MergeRuntimeContainers); change them there, or declare them on the predictor"}
    return {}


INFERENCE_SERVICE = Adapter("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices",
                            frozenset({"Deployment", knative.SERVICE_KIND}), _isvc_parts,
                            owner_label="serving.kserve.io/inferenceservice", part_label="component",
                            rollout=_isvc_rollout, reads=tuple((knative.GROUP, p) for p in knative.PLURALS),
                            names_child=naming.inference_service, state_apart=True,
                            part_forbidden=_isvc_part_forbidden)
RAY_CLUSTER = Adapter("RayCluster", "ray.io", "v1", "rayclusters", frozenset({"Pod"}), _ray_parts,
                      owner_label="ray.io/cluster", part_label="ray.io/group", rollout=_ray_rollout,
                      names_child=naming.ray_cluster, forbidden=_ray_forbidden)
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def _lws_parts(obj: Obj) -> tuple[Part, ...]:
    """A leader's template is leaderTemplate where set, else workerTemplate: a change there reaches the group.
    A replica is a group of `size` pods: the leader and size − 1 workers (without a leaderTemplate all `size`
    are made from workerTemplate)."""
    base = ("spec", "leaderWorkerTemplate")
    size = _positive(read(obj, (*base, "size")))
    if isinstance(read(obj, (*base, "leaderTemplate")), Mapping):
        return (Part("leader", (*base, "leaderTemplate", "spec"), ("spec", "replicas"), pods=1),
                Part("worker", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=max(1, size - 1)))
    return (Part("leader", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=size),
            Part("worker", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=size))


def _lws_surge(obj: Obj, replicas: int) -> int:
    """Groups a rolling update starts beside the old ones: rolloutStrategy.rollingUpdateConfiguration.maxSurge
    (an int or a percentage of replicas rounded up, capped at replicas; default 0), as lws v0.10.0
    constructLeaderStatefulSetApplyConfiguration scales it."""
    raw = read(obj, ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"))
    if isinstance(raw, str) and raw.endswith("%") and raw[:-1].isdigit():
        surge = -(-replicas * int(raw[:-1]) // 100)
    else:
        surge = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
    return max(0, min(surge, replicas))


def _lws_pod_part(labels: Mapping[str, Any]) -> str:
    return "leader" if str(labels.get(LWS_WORKER_INDEX, "")) == "0" else "worker"


def _lws_rollout(obj: Obj, child: Obj | None) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") in ("UpdateInProgress", "Progressing") \
                and condition.get("status") == "True":
            return f"{condition.get('type')}: {condition.get('reason', '')} {condition.get('message', '')}".strip()
    return child_rollout(child)


LEADER_WORKER_SET = Adapter("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                            frozenset({"StatefulSet"}), _lws_parts, owner_label=LWS_NAME, rollout=_lws_rollout,
                            hops=frozenset({("StatefulSet", "Pod")}), pod_part=_lws_pod_part,
                            names_child=naming.leader_worker_set, names_hop=naming.lws_worker_hop,
                            surge=_lws_surge)

# --- RayService v1: its RayClusters are built from spec.rayClusterConfig ------------------------------------

RAY_SERVICE_CONFIG = ("spec", "rayClusterConfig")
# KubeRay's labels on the RayClusters a RayService creates (ray-operator utils: RayOriginatedFromCR*LabelKey).
RAY_ORIGIN_NAME, RAY_ORIGIN_KIND = "ray.io/originated-from-cr-name", "ray.io/originated-from-crd"


def _ray_service_parts(obj: Obj) -> tuple[Part, ...]:
    return _ray_parts(obj, RAY_SERVICE_CONFIG)


def _ray_service_rollout(obj: Obj, child: Obj | None) -> str:
    """KubeRay's own rollout: a zero-downtime upgrade (a pending RayCluster prepared, then switched to), a
    RayService with no active RayCluster yet, or its active RayCluster not ready."""
    behind = _observed_behind(obj)
    if behind:
        return behind
    conditions = read(obj, ("status", "conditions"))
    # A rollback (kuberay v1.7.0 rayservice_controller.go: the goal reverted or changed mid-upgrade) runs while
    # UpgradeInProgress is still True: named first, it says why the wait lasts.
    for kind in ("RollbackInProgress", "UpgradeInProgress"):
        for condition in conditions if isinstance(conditions, list) else []:
            if isinstance(condition, Mapping) and condition.get("type") == kind and condition.get("status") == "True":
                return f"{kind}: {condition.get('reason', '')} {condition.get('message', '')}".strip()
    pending = read(obj, ("status", "pendingServiceStatus", "rayClusterName"))
    if pending:
        return f"KubeRay is preparing the pending RayCluster {pending} (a zero-downtime upgrade)"
    active = read(obj, ("status", "activeServiceStatus", "rayClusterName"))
    if not active:
        return "the RayService has no active RayCluster yet"
    # The pod's own RayCluster counts only when it is the active one: a retired one (awaiting KubeRay's deletion
    # delay) is not the RayService's rollout, and a resolve on its pods must still reach the revert.
    if child is not None and (child.get("metadata") or {}).get("name") == active:
        return _ray_rollout(child, None)
    return ""


INCREMENTAL = "NewClusterWithIncrementalUpgrade"


def ray_service_forbidden(obj: Obj, incremental_gate: bool | None = None) -> dict[str, str]:
    """What KubeRay never carries from rayClusterConfig to a pod (ray-operator rayservice_controller:
    shouldUpdateCluster, shouldPrepareNewCluster): the cluster hash leaves worker replicas out, so a replicas
    change reaches no RayCluster; a template change reaches pods only through a new RayCluster, which upgrade
    strategy None never prepares.

    `NewClusterWithIncrementalUpgrade` depends on the operator's feature gate RayServiceIncrementalUpgrade (kuberay
    v1.7.0 ray-operator/pkg/features/features.go; on by default there, off by default before v1.7): with it off,
    rayservice_controller.go isZeroDowntimeUpgradeEnabled returns false for any type but NewCluster, so KubeRay
    prepares no new RayCluster, as with None. The gate is a flag of the operator's process, invisible through the
    API: `incremental_gate` is what the policy declares (adapters.rayServiceIncrementalUpgrade); undeclared, a
    template change on such a RayService is refused rather than guessed."""
    out = {"scale-replicas": "KubeRay does not carry a worker group's replicas from rayClusterConfig to the running "
                             "RayCluster (its cluster hash leaves replicas out; the Ray autoscaler owns them)"}
    strategy = read(obj, ("spec", "upgradeStrategy", "type"))
    why = ""
    if strategy == "None":
        why = ("its upgradeStrategy.type is None: KubeRay prepares no new RayCluster, so a template change never "
               "reaches a pod")
    elif strategy == INCREMENTAL and incremental_gate is False:
        why = (f"its upgradeStrategy.type is {INCREMENTAL} and the policy declares KubeRay's "
               f"RayServiceIncrementalUpgrade gate off: KubeRay then prepares no new RayCluster, as with None "
               f"(rayservice_controller.go isZeroDowntimeUpgradeEnabled), so a template change never reaches a pod")
    elif strategy == INCREMENTAL and incremental_gate is None:
        why = (f"its upgradeStrategy.type is {INCREMENTAL}: KubeRay upgrades it only with its feature gate "
               f"RayServiceIncrementalUpgrade on, and otherwise never reaches a pod (as with None); the gate is not "
               f"visible through the API, so declare it in the policy (adapters.rayServiceIncrementalUpgrade)")
    if why:
        out.update({field: why for field in TEMPLATE_FIELDS})
    return out


RAY_SERVICE = Adapter("RayService", "ray.io", "v1", "rayservices", frozenset({"RayCluster"}), _ray_service_parts,
                      owner_label=RAY_ORIGIN_NAME, part_label="ray.io/group", rollout=_ray_service_rollout,
                      child_labels=((RAY_ORIGIN_KIND, "RayService"),), forbidden=ray_service_forbidden,
                      replaces_all=True, names_child=naming.ray_service)

# --- JobSet v1alpha2: Jobs per replicatedJob; the webhook keeps replicatedJobs immutable ---------------------

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # on its Jobs and their pods (jobset api: JobSetNameKey)
JOBSET_REPLICATED_JOB = naming.JOBSET_REPLICATED_JOB  # ReplicatedJobNameKey


def _jobset_parts(obj: Obj) -> tuple[Part, ...]:
    jobs = read(obj, ("spec", "replicatedJobs")) or []
    return tuple(Part(str(j.get("name", "")), ("spec", "replicatedJobs", i, "template", "spec", "template", "spec"),
                      ("spec", "replicatedJobs", i, "replicas"))
                 for i, j in enumerate(jobs) if isinstance(j, Mapping))


def _jobset_forbidden(obj: Obj) -> dict[str, str]:
    """kubernetes-sigs/jobset ValidateUpdate: spec.replicatedJobs is immutable; while the JobSet is (or is being)
    suspended, only its pod templates' labels, annotations, nodeSelector, tolerations and schedulingGates may
    change. None of the reactor's fields is among them."""
    webhook = ("the JobSet webhook keeps spec.replicatedJobs immutable (only a suspended JobSet's pod-template "
               "labels, annotations, nodeSelector, tolerations and schedulingGates may change)")
    return {"resize-gpu": f"{webhook}: its GPU requests cannot change",
            "scale-replicas": f"{webhook}: its replicas cannot change",
            "set-priority": f"{webhook}: its priorityClassName cannot change; a JobSet Kueue manages (label "
                            f"kueue.x-k8s.io/queue-name) changes priority through Kueue's label instead"}


def _jobset_rollout(obj: Obj, child: Obj | None) -> str:
    return ""  # a JobSet's template never changes: there is no rollout of it to wait for


JOB_SET = Adapter("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", frozenset({"Job"}), _jobset_parts,
                  owner_label=JOBSET_NAME, part_label=JOBSET_REPLICATED_JOB, rollout=_jobset_rollout,
                  forbidden=_jobset_forbidden, names_child=naming.job_set)
BUILTIN: tuple[Adapter, ...] = (NOTEBOOK, INFERENCE_SERVICE, RAY_CLUSTER, LEADER_WORKER_SET, RAY_SERVICE, JOB_SET)
