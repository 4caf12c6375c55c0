"""Owner adapters: where an operator's custom resource keeps its pod templates, replicas and priority.

A pod under an operator (a Kubeflow Notebook, a KServe InferenceService, a RayCluster) must be
changed through that operator's resource, never beneath it: the operator would undo the change.
An `Adapter` subclass says, for one kind, which children it creates, where its pod template(s)
live, how its rollout reads, what the operator refuses and how many pods a change starts beside
the old ones (base.py; one module per operator); the write is a JSON merge patch (custom resources
take no strategic merge, cluster/adapted.py). Pure: no I/O; the resolver, the conversion to a
`Workload` (cluster/kinds.py) and the act step call it.
"""

from __future__ import annotations

from reactor.integrations.adapters.base import Adapter, Adapters, Part
from reactor.integrations.adapters.builtin import BUILTIN

__all__ = ["BUILTIN", "Adapter", "Adapters", "Part"]
