"""Kueue: a workload with the `kueue.x-k8s.io/queue-name` label is admitted by Kueue, not only by the namespace.

Its priority is the `kueue.x-k8s.io/priority-class` label naming a WorkloadPriorityClass (the ladder
names those), not the pod template's `priorityClassName`; that label is immutable up to Kueue v0.14 and may
change (never be added or removed) from v0.15, where Kueue's Deployment and LeaderWorkerSet webhooks copy it
into the pod template (a change rolls the pods). Kueue's webhooks also keep a managed StatefulSet's or
LeaderWorkerSet's pod requests immutable (`as_managed` names each refusal); and its GPUs must fit its ClusterQueue's
quota: for the GPU resource, the nominalQuota of every flavor minus what the ClusterQueue's status
reports in use (flavorsUsage). This is kept apart from the namespace's ResourceQuota arithmetic:
`cluster_queue_quota` yields one more (hard, used) pair, which `with_cluster_queue` adds to the bounds as
one more quota the workload's pods count against (every quota must hold a change, so the tighter wins).
Pure: no I/O; the reader fetches the LocalQueue, the ClusterQueue and the classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from reactor.core.model import Bounds, QueueFacts, Quota, Workload
from reactor.core.quantity import value
from reactor.integrations.adapters.kserve import INFERENCE_SERVICE
from reactor.integrations.adapters.kubeflow import KUEUE_LABEL_STAYS, NOTEBOOK

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
V1BETA2 = "v1beta2"  # served from Kueue v0.15 on (v1beta1 deprecated there, still served in v0.19.2)
# Kinds whose pod requests Kueue's webhook keeps immutable while it manages them (v0.19.2 statefulset_webhook,
# leaderworkerset_webhook ValidateUpdate), and kinds whose pod template its webhook copies the priority label into
# (deployment_webhook, leaderworkerset_webhook Default: podTemplateSpecDefault), so a label change rolls their pods.
POD_GROUP_KINDS = frozenset({"StatefulSet", "LeaderWorkerSet"})
# KServe copies an InferenceService's labels into every component's pod template (v0.20.0 components/predictor.go
# buildObjectMeta; serverless: ksvc_reconciler.go createKnativeService), so a label change rolls its model servers too.
LABEL_ROLLS_KINDS = frozenset({"Deployment", "LeaderWorkerSet", "InferenceService"})
RESIZES = ("resize-gpu", "resize-cpu", "resize-memory")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # Kueue's workload-slicing opt-in (alpha; with its feature gate)


def queue_of(obj: Mapping[str, Any]) -> str:
    """The LocalQueue a workload is submitted to ("" when Kueue does not manage it)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_LABEL)
    return value if isinstance(value, str) else ""


def as_managed(workload: Workload, obj: Mapping[str, Any],
               label_mutable: Callable[[], bool] = lambda: True, *,
               release: tuple[int, int, int] | None = None) -> Workload:
    """The workload as Kueue sees it: its queue, its priority read from the Kueue label, and what Kueue's
    webhooks refuse or its controller undoes on it. `label_mutable`: whether the installed Kueue lets the
    priority label change (v0.15+, see `label_mutable_on`); asked only for a workload Kueue manages.
    `release`: the Kueue release the policy declares (adapters.kueueVersion), None where undeclared."""
    queue = queue_of(obj)
    if not queue:
        return workload
    labels = (obj.get("metadata") or {}).get("labels") or {}
    label = labels.get(PRIORITY_LABEL)
    mutable = label_mutable()
    kind = workload.ref.kind
    forbidden: dict[str, str] = {}  # the operator's stand beside these, but for the priority (Workload.refusals)
    if not mutable:
        forbidden["set-priority"] = (
            f"Kueue v0.14 and older ({GROUP}/{V1BETA2} not served) keeps the {PRIORITY_LABEL} label immutable "
            f"(jobframework ValidateUpdateForWorkloadPriorityClassName): its webhook refuses the change")
    elif not isinstance(label, str) or not label:
        forbidden["set-priority"] = (
            f"Kueue's webhook refuses to add a {PRIORITY_LABEL} label to a running workload "
            f"(v0.19.2 jobframework ValidateUpdateForWorkloadPriorityClassName)")
    if kind in POD_GROUP_KINDS:
        why = (f"Kueue's webhook keeps a managed {kind}'s pod requests immutable "
               f"(jobframework ValidateImmutablePodGroupPodSpec, {kind.lower()}_webhook ValidateUpdate)")
        forbidden.update({field: why for field in RESIZES})
    if kind == "StatefulSet":
        forbidden["scale-replicas"] = ("Kueue's webhook lets a managed StatefulSet's replicas change only to or from 0 "
                                       "(statefulset_webhook ValidateUpdate)")
    if kind == "RayCluster":
        why = ("Kueue suspends a running RayCluster whose pod templates no longer match its Workload: every pod, "
               "head included, would stop until it is admitted again")
        forbidden.update({field: why for field in RESIZES})
        forbidden["scale-replicas"] = _ray_scale_refusal(obj)
    rolls = mutable and kind in LABEL_ROLLS_KINDS
    if rolls and kind == "InferenceService" and "set-priority" not in forbidden:
        why = _isvc_label_refusal(obj)
        if why:
            forbidden["set-priority"] = why
    if mutable and kind == "StatefulSet" and "set-priority" not in forbidden:
        rolls, why = _statefulset_label(release)
        if why:
            forbidden["set-priority"] = why
    if kind == NOTEBOOK.kind:  # Kueue has no webhook for it: the refusals above do not apply, this one does
        forbidden["set-priority"] = KUEUE_LABEL_STAYS
    facts = QueueFacts(queue, forbidden, label_rolls=rolls)
    return replace(workload, kueue=facts, priority_class=label if isinstance(label, str) else None)


STS_COPIES = (((0, 15, 0), (0, 15, 5)), ((0, 16, 0), (0, 16, 1)))  # releases whose StatefulSet webhook copies the label


def _statefulset_label(release: tuple[int, int, int] | None) -> tuple[bool, str]:
    """(whether a priority-label change rolls a managed StatefulSet's pods, why it is refused ("" when it is not)).
    Kueue v0.15.0–0.15.5 and v0.16.0–0.16.1 copy the label into the pod template (jobs/statefulset
    statefulset_webhook.go Default): a change restarts every pod, one at a time, so it is checked as a template change.
    From v0.15.6 and v0.16.2 on it is no longer copied and the Workload's priority is not updated from it
    (statefulset_reconciler.go reconcileWorkload): the change would reach nothing, yet look verified. Both serve the
    same API versions, so the release is what the policy declares; undeclared, the change is refused."""
    if release is None:
        return False, ("Kueue v0.15.0–0.15.5 and v0.16.0–0.16.1 copy a StatefulSet's priority label into its pod "
                       "template (statefulset_webhook.go Default: every pod restarts), later releases carry it neither "
                       "to the running pods nor to the Workload's priority (statefulset_reconciler.go "
                       "reconcileWorkload); the served API versions cannot tell them apart, so declare the release "
                       "in the policy (adapters.kueueVersion)")
    if any(low <= release <= high for low, high in STS_COPIES):
        return True, ""
    shown = "v" + ".".join(map(str, release))
    return False, (f"Kueue {shown} (declared) carries a StatefulSet's priority label neither to its running pods nor "
                   f"to its Workload's priority (statefulset_reconciler.go reconcileWorkload): the change would "
                   f"change nothing")


def _isvc_label_refusal(obj: Mapping[str, Any]) -> str:
    """Why the priority label may not change on an InferenceService ("" where it may): the label rolls every
    component (KServe copies it into each one's pod template), so what KServe would do with a template change of any
    component (its canaries, a multi-node predictor: kserve.py) stands for the label too."""
    adapter = INFERENCE_SERVICE
    for part in adapter.parts(obj):
        why = adapter.refusals(obj, part, "").get("set-priority")
        if why:
            return (f"KServe copies the InferenceService's labels, {PRIORITY_LABEL} included, into the {part.name}'s "
                    f"pod template (components/predictor.go buildObjectMeta), so the change rolls it, and {why}")
    return ""


def _ray_scale_refusal(obj: Mapping[str, Any]) -> str:
    """Why a managed RayCluster's replicas are not the reactor's to change. A count change makes the admitted Workload
    non-equivalent (v0.19.2 jobframework/reconciler.go EquivalentToWorkload compares the pod sets' counts): Kueue
    evicts and suspends the job and KubeRay deletes every pod, head included, until it is admitted again. Only an
    elastic job (the `kueue.x-k8s.io/elastic-job: "true"` annotation, pkg/workloadslicing EnabledAnnotationKey) is
    resized in place, and only with Kueue's ElasticJobsViaWorkloadSlices feature gate on: a flag of Kueue's process
    the reactor cannot read, so even then it is refused, saying so (the Ray autoscaler is what scales such a job)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ELASTIC_JOB) == "true":
        return (f"it is annotated {ELASTIC_JOB}: \"true\", but Kueue resizes it in place only with its "
                f"ElasticJobsViaWorkloadSlices feature gate on, a flag of Kueue's process the reactor cannot read; "
                f"with it off Kueue suspends the RayCluster and KubeRay deletes every pod, head included")
    return ("a replica count unlike its admitted Workload's makes Kueue suspend the RayCluster (jobframework "
            "reconciler.go EquivalentToWorkload compares pod-set counts): KubeRay deletes every pod, head included, "
            f"until it is admitted again; only an elastic job ({ELASTIC_JOB}, Kueue's ElasticJobsViaWorkloadSlices) "
            "is resized in place")


def label_mutable_on(served_version: str) -> bool:
    """Kueue v0.15.0 made the priority label mutable (PR #7289) in the release that first served
    kueue.x-k8s.io/v1beta2 (PR #7304): v1beta2 served means the label may change (never be added or removed)."""
    return served_version == V1BETA2


def cluster_queue_quota(cluster_queue: Mapping[str, Any], resource: str) -> tuple[int, int] | None:
    """(nominal quota, in use) of `resource` over the ClusterQueue's flavors; None when it sets no quota for it."""
    nominal = _sum(((cluster_queue.get("spec") or {}).get("resourceGroups") or []), resource, "nominalQuota",
                   groups=True)
    if nominal is None:
        return None
    used = _sum(((cluster_queue.get("status") or {}).get("flavorsUsage") or []), resource, "total", groups=False)
    return nominal, used or 0


def _sum(items: list[Any], resource: str, field: str, *, groups: bool) -> int | None:
    flavors = [f for g in items if isinstance(g, Mapping) for f in g.get("flavors") or []] if groups else items
    total: int | None = None
    for flavor in flavors:
        for entry in (flavor.get("resources") or []) if isinstance(flavor, Mapping) else []:
            if isinstance(entry, Mapping) and entry.get("name") == resource and entry.get(field) is not None:
                total = (total or 0) + value(entry[field])
    return total


def with_cluster_queue(bounds: Bounds, quota: tuple[int, int] | None, queue: str) -> Bounds:
    """The bounds with the ClusterQueue's GPU quota as one more quota, unscoped: it counts every pod of the queue."""
    if quota is None:
        return bounds
    hard, used = quota
    return replace(bounds, quotas=(*bounds.quotas, Quota(name=f"ClusterQueue of LocalQueue {queue}", hard=hard,
                                                         used=used)))
