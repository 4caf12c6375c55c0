"""`reactor plan` explains a decision on each built-in adapter's resource and writes nothing (issue 17).

The plan is the engine in dry run and `print_plan`, as `reactor plan` runs them; the fixtures are those of the
adapters' own tests."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout
from typing import Any

import pytest

from reactor.app.assembly import build_engine
from reactor.intake.alerts import parse_notification
from reactor.tools.payloads import AlertSpec, notification
from reactor.tools.plan import print_plan
from tests.adapters.test_inferenceservice import isvc, pipeline  # noqa: F401 - fixtures
from tests.adapters.test_inferenceservice_serverless import serverless  # noqa: F401
from tests.adapters.test_leaderworkerset import lws  # noqa: F401
from tests.adapters.test_notebook import notebook  # noqa: F401
from tests.adapters.test_raycluster import cluster  # noqa: F401
from tests.adapters.test_rayservice import service  # noqa: F401
from tests.support import NAMESPACE, Reactor

CASES = {
    "notebook": ("notebook", "jupyter-0", "notebook", "Notebook/ml-workloads/jupyter"),
    "isvc": ("isvc", "serving.kserve.io/inferenceservice=llama", "kserve-container",
             "InferenceService/ml-workloads/llama"),
    "explainer": ("pipeline", "serving.kserve.io/inferenceservice=rag,component=explainer", "explainer",
                  "InferenceService/ml-workloads/rag"),
    "serverless": ("serverless", "serving.kserve.io/inferenceservice=llama", "kserve-container",
                   "InferenceService/ml-workloads/llama"),
    "cluster": ("cluster", "ray-gpu-workers-worker-00000", "ray-worker", "RayCluster/ml-workloads/ray"),
    "lws": ("lws", "vllm-1-1", "vllm-worker", "LeaderWorkerSet/ml-workloads/vllm"),
    "service": ("service", "serve-a1b2c-gpu-workers-worker-00000", "ray-worker", "RayService/ml-workloads/serve"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_explains_a_shrink_of_each_adapters_resource(reactor: Reactor, request: pytest.FixtureRequest,
                                                          case: str) -> None:
    fixture, pod, container, workload = CASES[case]
    request.getfixturevalue(fixture)
    if "=" in pod:  # a label selector: the pods of a Deployment KServe (or Knative, serverless) made
        pod = reactor.sim.list("pods", NAMESPACE, label_selector=pod)[0]["metadata"]["name"]
    engine = build_engine(_dry(reactor), kube=reactor.service.kube, metrics=reactor.service.engine.metrics)[0]
    body = notification([AlertSpec("GPUUnderutilized", NAMESPACE, pod, container, 0.1, 4)])
    before = dict(reactor.sim.requests)
    out = io.StringIO()
    with redirect_stdout(out):
        print_plan(engine.handle(parse_notification(body)), engine.settings)
    text = out.getvalue()
    assert f"workload: {workload}" in text and f"would apply: resize-gpu {container}: 4 → 1" in text, text
    assert not [k for k, n in reactor.sim.requests.items() if k[0] == "patch" and n != before.get(k, 0)]


def _dry(reactor: Reactor) -> Any:
    settings = reactor.service.engine.settings
    return dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, dry_run=True))
