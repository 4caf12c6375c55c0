"""One round of every controller, in a fixed order so that `settle()` is deterministic.

Garbage collection, ServiceAccounts (`default` in every namespace), Deployments, ReplicaSets, StatefulSets,
Jobs, CronJobs, node taints and NoExecute evictions, then scheduling and the kubelet.
"""

from __future__ import annotations

from reactor_sim import (
    cronjobs,
    deployments,
    jobs,
    nodelifecycle,
    replicasets,
    scheduler,
    serviceaccounts,
    statefulsets,
)
from reactor_sim.operations import Api


class Controllers:
    def __init__(self, api: Api) -> None:
        self.api = api

    def run_once(self) -> None:
        self.collect_garbage()
        serviceaccounts.ensure_default_accounts(self.api)
        deployments.sync_all(self.api)
        replicasets.sync_all(self.api)
        statefulsets.sync_all(self.api)
        jobs.sync_all(self.api)
        cronjobs.sync_all(self.api)
        nodelifecycle.sync_all(self.api)
        scheduler.schedule(self.api)

    def collect_garbage(self) -> None:
        """Delete objects whose controlling owner no longer exists (background propagation)."""
        for plural, ns, name in self.api.store.orphans():
            self.api.store.delete(plural, ns, name)
