"""The owner's side of each operator link: the name the operator gives its child, or the record it keeps of it.

A child's ownerReference (uid included) and labels are written by whoever creates the child, so anyone who may
create that kind in the namespace can make a look-alike that points at another team's resource (issue 24,
item 8). A link is believed only when the owner's side agrees too: the operator names its child after the
resource (`<isvc>-predictor`, `<jobset>-<replicatedJob>-<index>`) or records it in the resource's status (a
RayService's `activeServiceStatus.rayClusterName`). Each rule returns why the owner does not confirm the
child, None when it does; each cites the operator's code it mirrors. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.integrations.adapters.base import Obj, read

RAY_HEAD = "headgroup"  # KubeRay's ray.io/group value on the head pod (utils.RayNodeHeadGroupLabelValue)
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_RESTARTS = "jobset.sigs.k8s.io/restart-attempt"  # constants.RestartsKey
ISVC_COMPONENTS = ("predictor", "transformer", "explainer")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _labels(obj: Obj) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def notebook(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """kubeflow/notebooks v1.11.0 components/notebook-controller/controllers/notebook_controller.go
    generateStatefulSet: the StatefulSet is named as the Notebook, and only its pod template carries
    `notebook-name` (the StatefulSet's own labels are none, and CopyStatefulSetFields wipes any added later)."""
    name = _name(owner)
    if _name(child) != name:
        return f"the notebook controller names its StatefulSet {name} (generateStatefulSet), not {_name(child)}"
    labels = read(child, ("spec", "template", "metadata", "labels")) or {}
    if labels.get("notebook-name") != name:
        return f"its pod template lacks the label notebook-name={name} the notebook controller sets"
    return None


def isvc_child_name(owner: Obj, component: str) -> str | None:
    """kserve v0.20.0 pkg/constants PredictorServiceName / TransformerServiceName / ExplainerServiceName: the
    name of the Deployment (raw mode) or Knative Service (serverless) KServe makes for a component."""
    isvc = _name(owner)
    if component == "predictor":
        variant = read(owner, ("spec", "predictor", "name"))
        return f"{isvc}-{variant}-predictor" if isinstance(variant, str) and variant else f"{isvc}-predictor"
    return f"{isvc}-{component}" if component in ISVC_COMPONENTS else None


def isvc_other_children(owner: Obj, component: str) -> set[str]:
    """The other Deployments KServe v0.20.0 makes for the predictor, each with `component: predictor`: a canary's
    `<isvc>-<canary name>-predictor` (components/predictor.go reconcileCanaryDeployments, PredictorServiceName)
    and a multi-node predictor's workers `<isvc>-predictor-worker` (reconcileWorker, PredictorWorkerServiceName).
    Confirmed so that their pods reach the predictor's refusal (kserve.py `_isvc_part_forbidden`) with its reason."""
    if component != "predictor":
        return set()
    isvc, names = _name(owner), set()
    for canary in read(owner, ("spec", "canary")) or []:
        variant = read(canary, ("predictor", "name"))
        if isinstance(variant, str) and variant:
            names.add(f"{isvc}-{variant}-predictor")
    if isinstance(read(owner, ("spec", "predictor", "workerSpec")), Mapping):
        names.add(f"{isvc}-predictor-worker")
    return names


def inference_service(owner: Obj, child_kind: str, child: Obj) -> str | None:
    component = str(_labels(child).get("component", ""))
    expected = isvc_child_name(owner, component)
    if expected is None or not isinstance(read(owner, ("spec", component)), Mapping):
        return f"the InferenceService has no component {component!r} for its {child_kind} {_name(child)}"
    if _name(child) != expected and _name(child) not in isvc_other_children(owner, component):
        return f"KServe names the {component}'s {child_kind} {expected} (constants.PredictorServiceName), " \
               f"not {_name(child)}"
    return None


def _ray_pod_prefix(prefix: str, node_type: str) -> str:
    """kuberay v1.7.0 ray-operator/controllers/ray/utils/util.go PodName: the prefix cut at 50 characters, then
    `-<node type>` (and `-` before the generated suffix), lower case."""
    return (prefix[:50] + "-" + node_type).lower()


def ray_cluster(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """KubeRay v1.7.0 raycluster_controller.go createHeadPod / createWorkerPod and common/pod.go labelPod: the pod's
    `ray.io/group` is one of the cluster's groups, `ray.io/node-type` matches it, and the name is the one KubeRay
    generates: `<cluster>-head-<suffix>` (or `<cluster>-head` with deterministic head names) and
    `<cluster>-<group>-worker-<suffix>`.

    Weaker than the other rules: KubeRay's suffix is generated (`generateName`), so the owner's side records no
    pod name and a look-alike pod named with the right prefix, by someone who may create pods in the namespace,
    passes. What it confirms is that the pod is shaped as KubeRay makes them for a group this cluster has."""
    cluster, labels, pod = _name(owner), _labels(child), _name(child)
    group, node_type = str(labels.get("ray.io/group", "")), str(labels.get("ray.io/node-type", ""))
    base = read(owner, ("spec",)) or {}
    groups = {str(g.get("groupName", "")) for g in base.get("workerGroupSpecs") or [] if isinstance(g, Mapping)}
    if group != RAY_HEAD and group not in groups:
        return f"the RayCluster has no group {group!r}"
    wanted = "head" if group == RAY_HEAD else "worker"
    if node_type != wanted:
        return f"KubeRay labels the {group} pods ray.io/node-type={wanted}, not {node_type!r}"
    prefix = _ray_pod_prefix(cluster if wanted == "head" else f"{cluster}-{group}", wanted)
    if not (pod.startswith(prefix + "-") or (wanted == "head" and pod == prefix)):
        return f"KubeRay names the {group} pods {prefix}-<suffix> (utils.PodName), not {pod}"
    return None


def ray_service(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """kuberay v1.7.0 rayservice_controller.go: the RayService records the RayClusters it runs in
    `status.activeServiceStatus.rayClusterName` and, during an upgrade, `status.pendingServiceStatus.rayClusterName`;
    any other RayCluster pointing at it is not one it serves from."""
    recorded = {read(owner, ("status", side, "rayClusterName"))
                for side in ("activeServiceStatus", "pendingServiceStatus")} - {None, ""}
    if _name(child) not in recorded:
        names = ", ".join(sorted(map(str, recorded))) or "none"
        return f"the RayService records {names} as its RayClusters (status.activeServiceStatus), not {_name(child)}"
    return None


def leader_worker_set(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """lws v0.10.0 pkg/controllers/leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration: the
    leaders' StatefulSet is named as the LeaderWorkerSet."""
    if _name(child) != _name(owner):
        return f"the LeaderWorkerSet controller names its leader StatefulSet {_name(owner)}, not {_name(child)}"
    return None


LWS_NAME = "leaderworkerset.sigs.k8s.io/name"  # SetNameLabelKey
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"  # GroupIndexLabelKey
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"  # GroupUniqueHashLabelKey
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"  # WorkerIndexLabelKey
LWS_LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"  # LeaderPodNameAnnotationKey


def lws_worker_hop(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """lws v0.10.0 pkg/controllers/pod_controller.go Reconcile and constructWorkerStatefulSetApplyConfiguration: only
    a leader pod (worker-index 0) gets a worker StatefulSet, named as the leader pod, labelled with its group index and
    group key, selecting exactly those and the LWS's name, its pod template annotated with the leader's name, and
    controlled by the leader pod with blockOwnerDeletion (setControllerReferenceWithStatefulSet).

    Each of these can be copied by whoever may create StatefulSets in the namespace; what they prove together is
    that the StatefulSet is shaped as the controller makes it for that leader. What holds a look-alike out is the
    name: the controller creates the leader pod's StatefulSet as soon as the leader pod exists (with `startupPolicy:
    LeaderReady` once it is ready, with exclusive placement once it is scheduled: the name is free until then), so
    the name is taken — except where it never creates one, an LWS of size 1 (`lws_worker_made`, checked against the
    LWS itself)."""
    leader, labels, theirs = _name(owner), _labels(child), _labels(owner)
    if str(theirs.get(LWS_WORKER_INDEX, "")) != "0":
        return f"its controller {leader} is no leader pod (worker-index 0): the LeaderWorkerSet controller makes " \
               f"worker StatefulSets for leader pods only (pod_controller.go Reconcile)"
    if _name(child) != leader:
        return f"the LeaderWorkerSet controller names a group's worker StatefulSet after its leader pod " \
               f"{leader}, not {_name(child)}"
    for key in (LWS_GROUP_INDEX, LWS_GROUP_KEY):
        if not theirs.get(key) or labels.get(key) != theirs.get(key):
            return f"the worker StatefulSet's {key} is not its leader pod's"
    wanted = {key: theirs.get(key) for key in (LWS_GROUP_INDEX, LWS_NAME, LWS_GROUP_KEY)}
    selector = read(child, ("spec", "selector"))
    if not isinstance(selector, Mapping) or selector.get("matchLabels") != wanted or selector.get("matchExpressions"):
        return f"the worker StatefulSet's selector is not the one the LeaderWorkerSet controller sets ({wanted})"
    if (read(child, ("spec", "template", "metadata", "annotations")) or {}).get(LWS_LEADER_NAME) != leader:
        return f"the worker StatefulSet's pod template lacks the annotation {LWS_LEADER_NAME}={leader}"
    refs = [r for r in (child.get("metadata") or {}).get("ownerReferences") or []
            if isinstance(r, Mapping) and r.get("controller") is True]
    if not refs or refs[0].get("blockOwnerDeletion") is not True:
        return "its controller reference lacks blockOwnerDeletion, which the LeaderWorkerSet controller sets " \
               "(setControllerReferenceWithStatefulSet)"
    return None


def lws_worker_made(resource: Obj, child_kind: str, child: Obj) -> str | None:
    """lws v0.10.0 pkg/controllers/pod_controller.go Reconcile: `if size == 1 { return }` before any worker
    StatefulSet is built, so a LeaderWorkerSet of size 1 has none (the CRD's description of `size` still speaks of a
    0-replica StatefulSet; the code returns first): a StatefulSet claiming to be one is someone else's, made under a
    name the controller never takes. Checked against the LeaderWorkerSet as read (an old group
    of a rollout that changed the size to 1 is refused too: that rollout replaces it anyway)."""
    size = read(resource, ("spec", "leaderWorkerTemplate", "size"))
    size = 1 if size is None else size  # the CRD's default
    if child_kind == "StatefulSet" and (not isinstance(size, int) or size <= 1):
        return f"LeaderWorkerSet {_name(resource)} has size {size}: its controller makes no worker StatefulSet for " \
               f"it (pod_controller.go Reconcile returns early for size 1), so StatefulSet {_name(child)} is not its"
    if _labels(child).get(LWS_NAME) != _name(resource):
        return f"StatefulSet {_name(child)} is not labelled {LWS_NAME}={_name(resource)}"
    return None


def job_set(owner: Obj, child_kind: str, child: Obj) -> str | None:
    """jobset v0.12.0 pkg/util/placement/placement.go GenJobName: `<jobset>-<replicatedJob>-<index>`, one per index
    below the replicatedJob's replicas."""
    labels = _labels(child)
    rjob, index = str(labels.get(JOBSET_REPLICATED_JOB, "")), str(labels.get(JOBSET_JOB_INDEX, ""))
    jobs = [j for j in read(owner, ("spec", "replicatedJobs")) or []
            if isinstance(j, Mapping) and j.get("name") == rjob]
    if not jobs:
        return f"the JobSet has no replicatedJob {rjob!r}"
    replicas = jobs[0].get("replicas", 1)
    if not index.isdigit() or not isinstance(replicas, int) or int(index) >= replicas:
        return f"the JobSet's replicatedJob {rjob} has no job index {index!r} (replicas {replicas})"
    expected = f"{_name(owner)}-{rjob}-{int(index)}"
    if _name(child) != expected:
        return f"the JobSet controller names that Job {expected} (placement.GenJobName), not {_name(child)}"
    return None


def job_set_attempt(owner: Obj, child: Obj) -> str | None:
    """Whether the Job belongs to the JobSet's current run, by the label the JobSet controller reads to tell (jobset
    v0.12.0 jobset_controller.go getChildJobs): a Job whose `jobset.sigs.k8s.io/restart-attempt` is below
    `status.restarts` is one of a previous attempt, which the controller deletes and creates again under the same
    name (labelAndAnnotateObject writes the attempt); its pods are going away. The controller never labels a Job
    ahead of `status.restarts`, so a higher value is not one of its Jobs either.

    What the label does not prove: ownership. Anyone who may create or patch Jobs in the namespace writes any value,
    and the current one is public (the JobSet's status). A look-alike carrying the current attempt passes this check;
    what keeps it out is the name (`job_set`), which the controller's own Job holds — except while the name is free:
    before the controller first creates that Job, and on a restart between the old Job's removal and the new one's
    creation (getChildJobs then lists the look-alike by its controller reference's uid and runs it as its own).
    Not read: `job-restart-attempt`, written under the RestartJob feature gate (alpha, off by default), which
    restarts one Job without changing `restart-attempt`."""
    labels, attempt = _labels(child), read(owner, ("status", "restarts")) or 0
    value = str(labels.get(JOBSET_RESTARTS, ""))
    if value != str(attempt):
        which = "a previous restart attempt, which the JobSet controller deletes" if value.isdigit() and \
            int(value) < int(attempt) else "no restart attempt the JobSet controller has labelled"
        return f"the Job is labelled {JOBSET_RESTARTS}={labels.get(JOBSET_RESTARTS, '')!r} while the JobSet is on " \
               f"restart attempt {attempt} (status.restarts): {which} (getChildJobs) — not the JobSet's current run"
    return None


def by_pattern(pattern: str, owner: Obj, child_kind: str, child: Obj) -> str | None:
    """A custom adapter's declared rule (`childName`): the child's name is `pattern` with `{owner}` replaced."""
    expected = pattern.replace("{owner}", _name(owner))
    if _name(child) != expected:
        return f"the adapter's childName rule names that {child_kind} {expected}, not {_name(child)}"
    return None
