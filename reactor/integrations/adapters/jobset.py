"""JobSet v1alpha2: pods → Job → JobSet, each replicatedJob a part; its webhook forbids every change the reactor makes
but a Kueue priority label (see `JobSetAdapter.forbidden`). Follows the operator's published CRD (tests/fixtures/crds).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import Adapter, Obj, Part, read

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # on its Jobs and their pods (jobset api: JobSetNameKey)
JOBSET_REPLICATED_JOB = naming.JOBSET_REPLICATED_JOB  # ReplicatedJobNameKey


class JobSetAdapter(Adapter):
    """Each replicatedJob a part; nothing of it may change but through Kueue's priority label."""

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        jobs = read(obj, ("spec", "replicatedJobs")) or []
        return tuple(Part(str(j.get("name", "")),
                          ("spec", "replicatedJobs", i, "template", "spec", "template", "spec"),
                          ("spec", "replicatedJobs", i, "replicas"))
                     for i, j in enumerate(jobs) if isinstance(j, Mapping))

    def forbidden(self, obj: Obj) -> dict[str, str]:
        """kubernetes-sigs/jobset ValidateUpdate: spec.replicatedJobs is immutable; while the JobSet is (or is being)
        suspended, only its pod templates' labels, annotations, nodeSelector, tolerations and schedulingGates may
        change. None of the reactor's fields is among them."""
        webhook = ("the JobSet webhook keeps spec.replicatedJobs immutable (only a suspended JobSet's pod-template "
                   "labels, annotations, nodeSelector, tolerations and schedulingGates may change)")
        return {"resize-gpu": f"{webhook}: its GPU requests cannot change",
                "scale-replicas": f"{webhook}: its replicas cannot change",
                "set-priority": f"{webhook}: its priorityClassName cannot change; a JobSet Kueue manages (label "
                                f"kueue.x-k8s.io/queue-name) changes priority through Kueue's label instead"}

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        return ""  # a JobSet's template never changes: there is no rollout of it to wait for

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        """The owner's side is the name (naming.job_set); the restart-attempt label then only tells a Job of the
        current run from one of a previous attempt the controller is deleting — it proves no ownership
        (naming.job_set_attempt says why)."""
        return naming.job_set(owner, child_kind, child) or naming.job_set_attempt(owner, child)


JOB_SET = JobSetAdapter("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", frozenset({"Job"}),
                        owner_label=JOBSET_NAME, part_label=JOBSET_REPLICATED_JOB)
