"""The Kubernetes gateway: the only package that imports the `kubernetes` client.

`gateway` holds `KubeGateway` (every request the reactor sends); `routes` maps kinds to the client's API classes,
`failures` turns `ApiException`s into the reactor's errors and retry delays, `limiter` is the client-side rate
limit, `watches` the open watch streams. What the server serves (`Capabilities`, asked of it, never assumed) is
re-exported from reactor/cluster/capabilities.py, which imports no client, so `reactor doctor --help` stays fast.
"""

from reactor.cluster.capabilities import UNKNOWN, Capabilities
from reactor.cluster.kube.failures import Expired, NotFound
from reactor.cluster.kube.gateway import KubeGateway
from reactor.cluster.kube.limiter import RateLimiter
from reactor.cluster.kube.routes import MERGE, STRATEGIC

__all__ = ["MERGE", "STRATEGIC", "UNKNOWN", "Capabilities", "Expired", "KubeGateway", "NotFound", "RateLimiter"]
