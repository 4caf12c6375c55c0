"""The Kubernetes gateway: the only package that imports the `kubernetes` client.

`gateway` holds `KubeGateway` (every request the reactor sends); `routes` maps kinds to the client's API classes,
`failures` turns `ApiException`s into the reactor's errors and retry delays, `limiter` is the client-side rate
limit, `watches` the open watch streams, `capabilities` what the server serves (asked of it, never assumed).
"""

from reactor.cluster.kube.capabilities import UNKNOWN, Capabilities
from reactor.cluster.kube.failures import Expired, NotFound
from reactor.cluster.kube.gateway import KubeGateway
from reactor.cluster.kube.limiter import RateLimiter
from reactor.cluster.kube.routes import MERGE, STRATEGIC

__all__ = ["MERGE", "STRATEGIC", "UNKNOWN", "Capabilities", "Expired", "KubeGateway", "NotFound", "RateLimiter"]
