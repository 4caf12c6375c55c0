"""An embedded Kubernetes API server for tests and the demo: real REST over HTTP (or HTTPS), in-memory
store, admission, deterministic controllers (Deployment, ReplicaSet, StatefulSet, Job, CronJob, scheduler,
GC) and, with `SimCluster(rbac=True)`, bearer tokens and RBAC. It imports nothing from the rest of
`reactor` and not the `kubernetes` package.
"""

from reactor_sim.cluster import SimCluster
from reactor_sim.status import ApiError

__all__ = ["SimCluster", "ApiError"]
