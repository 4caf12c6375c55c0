"""The built-in adapters, each following its operator's published CRD (tests/fixtures/crds).

Kubeflow Notebook v1: one pod template at spec.template.spec, run by a StatefulSet the notebook
controller creates (no replicas of its own). KServe InferenceService v1beta1: the predictor is a
pod spec (spec.predictor.containers, priorityClassName) with minReplicas/maxReplicas; in raw
deployment mode KServe runs it as a Deployment. RayCluster v1: the head template and each worker
group's template and replicas; KubeRay creates the pods itself, labelled `ray.io/group`.
LeaderWorkerSet v1: the leader and worker templates, `replicas` groups; the leader StatefulSet is the
LWS's, each group's worker StatefulSet is its leader pod's (a hop the adapter declares). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Adapter, Obj, Part, read

RAY_HEAD = "headgroup"  # KubeRay's ray.io/group label value on the head pod


def _notebook_parts(obj: Obj) -> tuple[Part, ...]:
    return (Part("", ("spec", "template", "spec"), default_replicas=1),)


def _isvc_parts(obj: Obj) -> tuple[Part, ...]:
    # KServe runs `predictor.model` as the container named kserve-container.
    return (Part("", ("spec", "predictor"), ("spec", "predictor", "minReplicas"),
                 ("spec", "predictor", "maxReplicas"), model=("kserve-container", ("spec", "predictor", "model"))),)


def _ray_parts(obj: Obj) -> tuple[Part, ...]:
    head = Part(RAY_HEAD, ("spec", "headGroupSpec", "template", "spec"), default_replicas=1)
    groups = read(obj, ("spec", "workerGroupSpecs")) or []
    workers = tuple(
        Part(str(g.get("groupName", "")), ("spec", "workerGroupSpecs", i, "template", "spec"),
             ("spec", "workerGroupSpecs", i, "replicas"), ("spec", "workerGroupSpecs", i, "maxReplicas"),
             default_replicas=0)
        for i, g in enumerate(groups) if isinstance(g, Mapping)
    )
    return (head, *workers)


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
    return _observed_behind(obj) or _not_ready(obj) or child_rollout(child)


def _ray_rollout(obj: Obj, child: Obj | None) -> str:
    state: Any = (obj.get("status") or {}).get("state")
    if _observed_behind(obj):
        return _observed_behind(obj)
    return f"the RayCluster's state is {state!r}, not 'ready'" if state not in (None, "ready") else ""


NOTEBOOK = Adapter("Notebook", "kubeflow.org", "v1", "notebooks", frozenset({"StatefulSet"}), _notebook_parts,
                   owner_label="notebook-name", rollout=_notebook_rollout)
INFERENCE_SERVICE = Adapter("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices",
                            frozenset({"Deployment"}), _isvc_parts,
                            owner_label="serving.kserve.io/inferenceservice", rollout=_isvc_rollout)
RAY_CLUSTER = Adapter("RayCluster", "ray.io", "v1", "rayclusters", frozenset({"Pod"}), _ray_parts,
                      owner_label="ray.io/cluster", part_label="ray.io/group", rollout=_ray_rollout)
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def _lws_parts(obj: Obj) -> tuple[Part, ...]:
    """A leader's template is leaderTemplate where set, else workerTemplate: a change there reaches the group."""
    base = ("spec", "leaderWorkerTemplate")
    leader = "leaderTemplate" if isinstance(read(obj, (*base, "leaderTemplate")), Mapping) else "workerTemplate"
    return (Part("leader", (*base, leader, "spec"), ("spec", "replicas")),
            Part("worker", (*base, "workerTemplate", "spec"), ("spec", "replicas")))


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
                            hops=frozenset({("StatefulSet", "Pod")}), pod_part=_lws_pod_part)
BUILTIN: tuple[Adapter, ...] = (NOTEBOOK, INFERENCE_SERVICE, RAY_CLUSTER, LEADER_WORKER_SET)
