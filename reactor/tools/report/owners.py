"""Which workload each pod belongs to: kube-state-metrics' owner series where Prometheus has them, else the pods'
ownerReferences read from the cluster (`--kubeconfig`, cluster.py), else the controllers' naming conventions. Pure:
reads what collect.py and cluster.py fetched.

The owner series are kube-state-metrics' (Prometheus sets their target labels; a tenant cannot forge them the
way it can name its pod): Pod → ReplicaSet → Deployment, Pod → StatefulSet, Pod → Job → CronJob.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reactor.tools.report.model import Grouping, WorkloadKey
from reactor.tools.report.source import Series

# Deployment pods: <deployment>-<pod-template-hash>-<5 chars>; StatefulSet pods: <name>-<ordinal>.
_DEPLOYMENT_POD = re.compile(r"^(?P<name>.+)-[bcdfghjklmnpqrstvwxz2456789]{5,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$")
_STATEFUL_POD = re.compile(r"^(?P<name>.+)-\d+$")


def _by(series: Sequence[Series], key: str) -> dict[str, tuple[str, str]]:
    found = {}
    for s in series:
        name = s.labels.get(key)
        if name:
            found[name] = (s.labels.get("owner_kind", ""), s.labels.get("owner_name", ""))
    return found


def unowned(pods: Sequence[str], owners: Mapping[str, Sequence[Series]]) -> list[str]:
    """The pods no kube_pod_owner series names: the ones the cluster is asked about."""
    pod_owner = _by(owners.get("pod", ()), "pod")
    return [p for p in pods if p not in pod_owner]


def resolve(namespace: str, pods: Sequence[str], owners: Mapping[str, Sequence[Series]],
            cluster: Mapping[str, WorkloadKey] | None = None) -> dict[str, tuple[WorkloadKey, Grouping]]:
    """Each pod's workload and how it was found. The owner series' verdict is the namespace's where it has them (a
    pod without one is a bare pod there); the cluster's (ownerReferences, checked by reactor/resolve) serves a pod
    they do not name; the name is the last guess, and it guesses the same workload the cluster would for a
    Deployment's or a StatefulSet's pod, so a workload whose old pods are gone is not split."""
    cluster = cluster or {}
    pod_owner = _by(owners.get("pod", ()), "pod")
    if not any(p in pod_owner for p in pods):
        return {p: (cluster[p], Grouping.KUBECONFIG) if p in cluster else (by_name(namespace, p), Grouping.POD_NAME)
                for p in pods}
    replicasets = _by(owners.get("replicaset", ()), "replicaset")
    jobs = _by(owners.get("job", ()), "job_name")
    found = {}
    for pod in pods:
        if pod not in pod_owner and pod in cluster:
            found[pod] = (cluster[pod], Grouping.KUBECONFIG)
            continue
        kind, name = pod_owner.get(pod, ("", ""))
        if kind == "ReplicaSet" and replicasets.get(name, ("", ""))[0] not in ("", "<none>"):
            kind, name = replicasets[name]
        elif kind == "Job" and jobs.get(name, ("", ""))[0] not in ("", "<none>"):
            kind, name = jobs[name]
        if kind in ("", "<none>"):
            kind, name = "Pod", pod
        found[pod] = (WorkloadKey(kind, namespace, name), Grouping.OWNER_SERIES)
    return found


def by_name(namespace: str, pod: str) -> WorkloadKey:
    """A guess from the pod's name, for clusters without kube-state-metrics; the report says it guessed."""
    m = _DEPLOYMENT_POD.match(pod)
    if m:
        return WorkloadKey("Deployment", namespace, m["name"])
    m = _STATEFUL_POD.match(pod)
    if m:
        return WorkloadKey("StatefulSet", namespace, m["name"])
    return WorkloadKey("Pod", namespace, pod)


def priority_classes(owners: Mapping[str, Sequence[Series]]) -> dict[str, str]:
    """Each pod's PriorityClass, from kube_pod_info (empty where it has none)."""
    found = owners.get("priority", ())
    return {s.labels["pod"]: s.labels.get("priority_class", "") for s in found if "pod" in s.labels}
