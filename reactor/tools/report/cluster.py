"""`--kubeconfig`: the owners of the pods Prometheus has no owner series for, read from the cluster. Read only.

The reactor's own resolver (reactor/resolve) walks each pod's ownerReferences through the gateway
(reactor/cluster/kube): Pod → ReplicaSet → Deployment, Pod → StatefulSet, Pod → Job → CronJob, every link believed
only with a matching uid (a tenant can write any ownerReference on its own pod), a pod that is gone found through
the controller that named it. It only reads (GET and LIST): the report needs `get`/`list` on pods, replicasets,
jobs and the workloads' kinds, no write verb. A pod whose owner cannot be found or believed is left to the name
guess (owners.py), and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from reactor.cluster.kube import KubeGateway
from reactor.integrations.adapters import Adapters
from reactor.resolve.owners import Reader, resolve_owner
from reactor.tools.report.model import WorkloadKey


class ClusterOwners:
    """Pods' workloads as the reactor would resolve them, one `Reader` per namespace (each object read once, the
    pods of a namespace in one LIST)."""

    def __init__(self, kube: KubeGateway, adapters: Adapters) -> None:
        self.kube = kube
        self.adapters = adapters

    def owners(self, namespace: str, pods: Sequence[str]) -> dict[str, WorkloadKey]:
        """The pods of `namespace` whose owner was found and believed; `TemporaryError` / `PermanentError` from the
        gateway (unreachable, forbidden) pass up: the report then fails rather than guess silently."""
        reader = Reader(self.kube, adapters=self.adapters)
        reader.prime_pods(namespace, set(pods))
        found = {}
        for pod in pods:
            owner = resolve_owner(reader, namespace, pod)
            if owner is not None and not owner.unverified:
                found[pod] = WorkloadKey(str(owner.ref.kind), namespace, owner.ref.name)
        return found
