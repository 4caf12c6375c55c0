"""The built-in adapters, one module per operator, each following its operator's published CRD
(tests/fixtures/crds): kubeflow.py (Notebook), kserve.py (InferenceService), ray.py (RayCluster, RayService),
lws.py (LeaderWorkerSet), jobset.py (JobSet). Pure: no I/O.
"""

from __future__ import annotations

from reactor.integrations.adapters.base import Adapter
from reactor.integrations.adapters.jobset import JOB_SET
from reactor.integrations.adapters.kserve import INFERENCE_SERVICE, isvc_mode
from reactor.integrations.adapters.kubeflow import NOTEBOOK
from reactor.integrations.adapters.lws import LEADER_WORKER_SET
from reactor.integrations.adapters.ray import RAY_CLUSTER, RAY_SERVICE
from reactor.integrations.adapters.status import child_rollout

__all__ = ["BUILTIN", "child_rollout", "isvc_mode"]

BUILTIN: tuple[Adapter, ...] = (NOTEBOOK, INFERENCE_SERVICE, RAY_CLUSTER, LEADER_WORKER_SET, RAY_SERVICE, JOB_SET)
