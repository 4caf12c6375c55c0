"""An embedded Kubernetes API server for tests and the demo: real REST over HTTP, in-memory store,
deterministic controllers. It imports nothing from the rest of `reactor` and not the `kubernetes` package.
"""

from .cluster import SimCluster
from .status import ApiError

__all__ = ["SimCluster", "ApiError"]
