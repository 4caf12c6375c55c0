"""The tests play the operators (they are not simulated): read the custom resource, create what the
operator would create (StatefulSet, Deployment or pods) with its controller reference, uid and labels,
and report status as the operator does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from reactor_sim import SimCluster
from tests.support import NAMESPACE

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def install(sim: SimCluster, *files: str) -> None:
    for name in files:
        sim.load_manifests(CRDS / name)


def container(name: str, gpus: int, image: str = "registry.example.com/app:1") -> Obj:
    return {"name": name, "image": image, "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}}


def owner_ref(obj: Obj) -> list[Obj]:
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


def reconcile_notebook(sim: SimCluster, name: str, *, settle: bool = True) -> None:
    """Kubeflow's notebook controller: a StatefulSet `name` (1 replica) with the notebook's pod template."""
    nb = custom(sim, "notebooks", name)
    labels = {"statefulset": name, "notebook-name": name}
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "ownerReferences": owner_ref(nb)},
               "spec": {"replicas": 1, "serviceName": "", "selector": {"matchLabels": {"statefulset": name}},
                        "template": template_of(nb["spec"]["template"]["spec"], labels)}})
    if settle:
        sim.settle()


def reconcile_isvc(sim: SimCluster, name: str, *, settle: bool = True) -> None:
    """KServe in raw deployment mode: a Deployment `<name>-<component>` with minReplicas pods for the predictor and
    for the transformer and explainer where the resource has them, each labelled `component`."""
    isvc = custom(sim, "inferenceservices", name)
    for component in ("predictor", "transformer", "explainer"):
        if component in isvc["spec"]:
            _isvc_component(sim, isvc, component)
    if settle:
        sim.settle()
        generation = custom(sim, "inferenceservices", name)["metadata"]["generation"]
        set_status(sim, "inferenceservices", name,
                   {"observedGeneration": generation, "conditions": [{"type": "Ready", "status": "True"}]})


def _isvc_component(sim: SimCluster, isvc: Obj, component: str) -> None:
    name = isvc["metadata"]["name"]
    spec = dict(isvc["spec"][component])
    if "model" in spec:  # KServe builds kserve-container from the model spec and its runtime
        model = {"name": "kserve-container", "image": "kserve/huggingfaceserver:v0.14",
                 "resources": spec["model"].get("resources", {})}
        spec["containers"] = [model, *spec.get("containers", [])]
    labels = {"app": f"isvc.{name}-{component}", "serving.kserve.io/inferenceservice": name, "component": component}
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": f"{name}-{component}", "namespace": NAMESPACE, "labels": labels,
                            "ownerReferences": owner_ref(isvc)},
               "spec": {"replicas": int(spec.get("minReplicas", 1)),
                        "selector": {"matchLabels": {"app": labels["app"]}},
                        "template": template_of(spec, labels)}})


def reconcile_ray(sim: SimCluster, name: str) -> None:
    """KubeRay: the head pod and `replicas` pods per worker group, created directly, labelled by group; status
    `ready` with the generation it observed."""
    rc = custom(sim, "rayclusters", name)
    groups = [("headgroup", "head", rc["spec"]["headGroupSpec"]["template"]["spec"], 1)]
    groups += [(g["groupName"], "worker", g["template"]["spec"], int(g.get("replicas", 0)))
               for g in rc["spec"].get("workerGroupSpecs") or []]
    existing = {p["metadata"]["name"] for p in sim.list("pods", NAMESPACE, label_selector=f"ray.io/cluster={name}")}
    for group, node_type, pod_spec, replicas in groups:
        for i in range(replicas):
            if f"{name}-{group}-{i}" in existing:
                continue  # KubeRay leaves running pods alone on a template change; new pods get the new template
            labels = {"ray.io/cluster": name, "ray.io/group": group, "ray.io/node-type": node_type}
            spec = template_of(pod_spec, labels)["spec"]
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"{name}-{group}-{i}", "namespace": NAMESPACE, "labels": labels,
                                    "ownerReferences": owner_ref(rc)}, "spec": spec})
    sim.settle()
    set_status(sim, "rayclusters", name,
               {"state": "ready", "observedGeneration": custom(sim, "rayclusters", name)["metadata"]["generation"]})


LWS = "leaderworkerset.sigs.k8s.io/name"


def reconcile_lws(sim: SimCluster, name: str) -> None:
    """The LWS controller: StatefulSet `name` of leaders (one per group, worker-index 0); for each leader pod a
    StatefulSet `name-<group>` of size-1 workers whose controller is that leader pod."""
    lws = custom(sim, "leaderworkersets", name)
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    leader_spec = (tmpl.get("leaderTemplate") or tmpl["workerTemplate"])["spec"]
    leader_labels = {LWS: name, "leaderworkerset.sigs.k8s.io/worker-index": "0", "role": f"{name}-leader"}
    sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LWS: name},
                            "ownerReferences": owner_ref(lws)},
               "spec": {"replicas": int(lws["spec"].get("replicas", 1)), "serviceName": "",
                        "selector": {"matchLabels": {"role": f"{name}-leader"}},
                        "template": template_of(leader_spec, leader_labels)}})
    sim.settle()
    for leader in sim.list("pods", NAMESPACE, label_selector=f"role={name}-leader"):
        group = leader["metadata"]["name"].rsplit("-", 1)[1]
        labels = {LWS: name, "leaderworkerset.sigs.k8s.io/group-index": group,
                  "leaderworkerset.sigs.k8s.io/worker-index": "1", "role": f"{name}-worker-{group}"}
        sim.apply({"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": f"{name}-{group}", "namespace": NAMESPACE, "labels": {LWS: name},
                                "ownerReferences": owner_ref(leader)},
                   "spec": {"replicas": int(tmpl.get("size", 1)) - 1, "serviceName": "",
                            "selector": {"matchLabels": {"role": labels["role"]}},
                            "template": template_of(tmpl["workerTemplate"]["spec"], labels)}})
    sim.settle()


RAY_ORIGIN = {"ray.io/originated-from-crd": "RayService"}


def ray_service_cluster(sim: SimCluster, service: str, suffix: str) -> str:
    """KubeRay's RayService controller: a RayCluster `<service>-raycluster-<suffix>` built from rayClusterConfig,
    controlled by the RayService and labelled with its name and kind; KubeRay's RayCluster controller makes its
    pods. Returns the cluster's name."""
    svc = custom(sim, "rayservices", service)
    name = f"{service}-raycluster-{suffix}"
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


JOBSET = "jobset.sigs.k8s.io/jobset-name"
JOBSET_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"


def reconcile_jobset(sim: SimCluster, name: str) -> None:
    """The JobSet controller: `replicas` Jobs `<jobset>-<replicatedJob>-<index>` per replicatedJob, controlled by the
    JobSet and labelled (Job and pod template) with its name, the replicatedJob's name and the job index; the Job
    controller makes their pods."""
    js = custom(sim, "jobsets", name)
    for rjob in js["spec"]["replicatedJobs"]:
        for index in range(int(rjob.get("replicas", 1))):
            labels = {JOBSET: name, JOBSET_RJOB: rjob["name"], "jobset.sigs.k8s.io/job-index": str(index)}
            spec = copy.deepcopy(rjob["template"]["spec"])
            spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(labels)
            sim.apply({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": f"{name}-{rjob['name']}-{index}", "namespace": NAMESPACE,
                                    "labels": labels, "ownerReferences": owner_ref(js)},
                       "spec": spec})
    sim.settle()


KNATIVE = "serving.knative.dev"
ISVC_LABEL = "serving.kserve.io/inferenceservice"


def reconcile_isvc_serverless(sim: SimCluster, name: str, *, ready: bool = True) -> None:
    """KServe in serverless mode (its default) and Knative Serving under it: per component a Knative Service
    `<name>-<component>` controlled by the InferenceService; Knative's Configuration, a Revision per generation of
    it, and the Revision's Deployment `<revision>-deployment`; an older Revision, no longer routed, scales to zero.
    `ready=False`: the newest Revision is created but not ready yet (status as KServe and Knative report it)."""
    isvc = custom(sim, "inferenceservices", name)
    components = {}
    for component in ("predictor", "transformer", "explainer"):
        if component in isvc["spec"]:
            components[component] = _knative_component(sim, isvc, component, ready)
    sim.settle()
    generation = custom(sim, "inferenceservices", name)["metadata"]["generation"]
    ready_condition = {"type": "Ready", "status": "True" if ready else "False",
                       **({} if ready else {"reason": "RevisionMissing", "message": "revision not ready"})}
    statuses = {}
    for component, (service, created, previous) in components.items():
        latest_ready = created if ready else previous
        ksvc = sim.get(f"services.{KNATIVE}", NAMESPACE, service)
        set_status(sim, f"services.{KNATIVE}", service,
                   {"observedGeneration": ksvc["metadata"]["generation"], "conditions": [ready_condition],
                    "latestCreatedRevisionName": created, "latestReadyRevisionName": latest_ready})
        statuses[component] = {"latestCreatedRevision": created, "latestReadyRevision": latest_ready,
                               "latestRolledoutRevision": latest_ready}
    set_status(sim, "inferenceservices", name, {"observedGeneration": generation, "components": statuses,
                                                "conditions": [{"type": "Ready", "status": "True"}]})


def _knative_component(sim: SimCluster, isvc: Obj, component: str, ready: bool) -> tuple[str, str, str]:
    """Returns (Knative Service, its newest Revision, the Revision before it or ""); the older Revisions keep
    their pods until the newest is ready."""
    name = isvc["metadata"]["name"]
    spec = dict(isvc["spec"][component])
    if "model" in spec:
        model = {"name": "kserve-container", "image": "kserve/huggingfaceserver:v0.14",
                 "resources": spec["model"].get("resources", {})}
        spec["containers"] = [model, *spec.get("containers", [])]
    labels = {ISVC_LABEL: name, "component": component}
    scale = {"autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev",
             "autoscaling.knative.dev/min-scale": str(spec.get("minReplicas", 1)),
             **({"autoscaling.knative.dev/max-scale": str(spec["maxReplicas"])} if spec.get("maxReplicas") else {})}
    template = {"metadata": {"labels": labels, "annotations": scale}, "spec": template_of(spec, labels)["spec"]}
    service = f"{name}-{component}"
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Service",
               "metadata": {"name": service, "namespace": NAMESPACE, "labels": labels, "ownerReferences": owner_ref(isvc)},
               "spec": {"template": template, "traffic": [{"latestRevision": True, "percent": 100}]}})
    ksvc = sim.get(f"services.{KNATIVE}", NAMESPACE, service)
    service_labels = {**labels, f"{KNATIVE}/service": service, f"{KNATIVE}/serviceUID": ksvc["metadata"]["uid"]}
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Configuration",
               "metadata": {"name": service, "namespace": NAMESPACE, "labels": service_labels,
                            "ownerReferences": owner_ref(ksvc)},
               "spec": {"template": copy.deepcopy(template)}})
    config = custom(sim, "configurations", service)
    generation = config["metadata"]["generation"]
    revision = f"{service}-{generation:05d}"
    previous = f"{service}-{generation - 1:05d}" if generation > 1 else ""
    if not [r for r in sim.list("revisions", NAMESPACE) if r["metadata"]["name"] == revision]:
        _revision(sim, config, revision, template)
    older = [] if not ready else sim.list("deployments", NAMESPACE, label_selector=f"{KNATIVE}/configuration={service}")
    for dep in older:
        if dep["metadata"]["labels"][f"{KNATIVE}/revision"] != revision and dep["spec"]["replicas"]:
            dep["spec"]["replicas"] = 0  # a Revision no route sends traffic to scales to zero
            sim.apply(dep)
    return service, revision, previous


def _revision(sim: SimCluster, config: Obj, revision: str, template: Obj) -> None:
    """Knative's Revision of the Configuration's generation, and its Deployment (min-scale replicas)."""
    meta = config["metadata"]
    labels = {**template["metadata"]["labels"], f"{KNATIVE}/configuration": meta["name"],
              f"{KNATIVE}/configurationGeneration": str(meta["generation"]),
              f"{KNATIVE}/configurationUID": meta["uid"], f"{KNATIVE}/routingState": "active",
              f"{KNATIVE}/service": meta["labels"][f"{KNATIVE}/service"],
              f"{KNATIVE}/serviceUID": meta["labels"][f"{KNATIVE}/serviceUID"]}
    sim.apply({"apiVersion": f"{KNATIVE}/v1", "kind": "Revision",
               "metadata": {"name": revision, "namespace": NAMESPACE, "labels": labels,
                            "annotations": dict(template["metadata"]["annotations"]), "ownerReferences": owner_ref(config)},
               "spec": copy.deepcopy(template["spec"])})
    rev = custom(sim, "revisions", revision)
    pod_labels = {**labels, f"{KNATIVE}/revision": revision, f"{KNATIVE}/revisionUID": rev["metadata"]["uid"],
                  "app": revision}
    replicas = int(template["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"])
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": f"{revision}-deployment", "namespace": NAMESPACE, "labels": pod_labels,
                            "ownerReferences": owner_ref(rev)},
               "spec": {"replicas": replicas,
                        "selector": {"matchLabels": {f"{KNATIVE}/revisionUID": rev["metadata"]["uid"]}},
                        "template": {"metadata": {"labels": pod_labels}, "spec": copy.deepcopy(template["spec"])}}})
