"""KServe InferenceService v1beta1: the predictor is a pod spec (spec.predictor.containers, priorityClassName) with
minReplicas/maxReplicas, and the transformer and explainer where the resource has them; in raw deployment mode
KServe runs each as a Deployment, in serverless mode as a Knative Service (knative.py). Follows the operator's
published CRD (tests/fixtures/crds). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from reactor.core.ownership import ControllerRef
from reactor.integrations.adapters import knative, naming
from reactor.integrations.adapters.base import Adapter, Climb, Fetch, Obj, Part, read
from reactor.integrations.adapters.status import TEMPLATE_FIELDS, child_rollout, not_ready

ISVC_COMPONENTS = naming.ISVC_COMPONENTS  # KServe's `component` label on each one's pods
# kserve v0.20.0 pkg/apis/serving/v1beta1/predictor.go PredictorSpec.GetImplementations: the framework fields, in
# the order KServe looks for them, then `model`; a plain `containers` list (custom predictor) comes after.
ISVC_IMPLEMENTATIONS = ("xgboost", "pytorch", "triton", "sklearn", "tensorflow", "onnx", "pmml", "lightgbm",
                        "paddle", "huggingface", "model")


def isvc_implementations(obj: Obj) -> tuple[str, ...]:
    """The predictor's implementation fields present (PredictorSpec.GetImplementations, containers aside)."""
    predictor = read(obj, ("spec", "predictor"))
    if not isinstance(predictor, Mapping):
        return ()
    return tuple(f for f in ISVC_IMPLEMENTATIONS if isinstance(predictor.get(f), Mapping))


ISVC_FIELDS = (*TEMPLATE_FIELDS, "scale-replicas")
AUTOSCALER_CLASS = "serving.kserve.io/autoscalerClass"  # hpa (default), keda, external, none


def isvc_mode(obj: Obj) -> str:
    """KServe's deployment mode for the resource: kserve v0.20.0 controllers/v1beta1/inferenceservice/utils
    GetDeploymentMode: status.deploymentMode first, then the serving.kserve.io/deploymentMode annotation (legacy
    RawDeployment read as Standard, Serverless as Knative); "" where neither says (the cluster's default)."""
    raw = read(obj, ("status", "deploymentMode")) or \
        ((obj.get("metadata") or {}).get("annotations") or {}).get("serving.kserve.io/deploymentMode")
    return {"RawDeployment": "Standard", "Serverless": "Knative"}.get(str(raw or ""), str(raw or ""))


def _isvc_part_forbidden(obj: Obj, part: Part, gpu_resource: str) -> dict[str, str]:
    """What KServe v0.20.0 would not carry to the component's pods the way the reactor's plan says, per part:

    - a multi-node predictor (`workerSpec`): createRawDeployment sets the head's and the workers' GPUs from the
      tensor and pipeline parallelism sizes (addGPUResourceToDeployment) and the worker Deployment's replicas
      itself (createRawWorkerDeployment); a priority would reach the head only;
    - `spec.canary` (Standard mode): reconcileCanaryDeployments builds every canary Deployment from the stable
      predictor merged with the canary's (buildCanaryPredictor) and splits minReplicas with them
      (canaryReplicaCount): a predictor change lands on the canaries too, which the reactor does not model;
    - `canaryTrafficPercent` below 100 in Knative mode once a revision has rolled out: ksvc_reconciler.go
      NewKsvcReconciler keeps the last rolled-out revision serving the rest of the traffic with the old template,
      so the change reaches only the canary revision and both revisions hold GPUs until someone promotes it;
    - more than one implementation: KServe's webhook refuses it (validateExactlyOneImplementation);
    - a `model` (or framework field) without the GPU: KServe merges the ServingRuntime's kserve-container under it
      (utils MergeServingRuntimeAndInferenceServiceSpecs / MergeRuntimeContainers), so the pods' GPUs are the
      runtime's; one written here would override the runtime's and a revert could not restore it."""
    name = part.name
    if name == "predictor":
        if isinstance(read(obj, ("spec", "predictor", "workerSpec")), Mapping):
            why = ("a multi-node predictor (spec.predictor.workerSpec): KServe sets its head's and workers' GPUs "
                   "from the tensor and pipeline parallelism sizes and the workers' replicas itself "
                   "(createRawDeployment), over what the spec says")
            return {f: why for f in ISVC_FIELDS}
        canaries = read(obj, ("spec", "canary"))
        if isinstance(canaries, list) and canaries:
            named = ", ".join(str(read(c, ("predictor", "name")) or "?") for c in canaries)
            why = (f"it has canaries (spec.canary: {named}): KServe builds each canary Deployment from the predictor "
                   f"merged with the canary's and splits minReplicas with them (components/predictor.go "
                   f"buildCanaryPredictor, canaryReplicaCount), so a predictor change also changes the canaries; "
                   f"promote or remove them first")
            return {f: why for f in ISVC_FIELDS}
    percent = read(obj, ("spec", name, "canaryTrafficPercent"))
    rolled = read(obj, ("status", "components", name, "latestRolledoutRevision"))
    if isinstance(percent, int) and percent < 100 and rolled and isvc_mode(obj) not in ("Standard", "ModelMesh"):
        why = (f"the {name} has canaryTrafficPercent {percent}: KServe routes only {percent}% to the new Knative "
               f"revision and keeps revision {rolled} serving the rest with the old template (ksvc_reconciler.go "
               f"NewKsvcReconciler), so the change would reach only the canary while both revisions hold GPUs; "
               f"promote it (canaryTrafficPercent 100 or unset) first")
        return {f: why for f in ISVC_FIELDS}
    if name != "predictor":
        return {}
    implementations = isvc_implementations(obj)
    if len(implementations) > 1:
        why = (f"the predictor sets {' and '.join(implementations)}: KServe's webhook refuses more than one "
               f"implementation (validateExactlyOneImplementation)")
        return {f: why for f in ISVC_FIELDS}
    if implementations and part.model is not None:
        resources = read(obj, (*part.model[1], "resources")) or {}
        declared = any(isinstance(resources.get(k), Mapping) and gpu_resource in resources[k]
                       for k in ("limits", "requests"))
        if not declared:
            runtime = (read(obj, ("status", "servingRuntimeName")) or read(obj, ("status", "clusterServingRuntimeName"))
                       or read(obj, (*part.model[1], "runtime")) or "the one KServe selects for its model format")
            return {"resize-gpu": f"the predictor's {implementations[0]} sets no {gpu_resource}: its GPUs come from "
                                  f"ServingRuntime {runtime} (KServe merges the runtime's kserve-container under it, "
                                  f"MergeRuntimeContainers); change them there, or declare them on the predictor"}
    return {}


# kserve v0.20.0 inference_service_status.go readyConditionsMap: the condition KServe sets for each component.
READY_CONDITIONS = {"predictor": "PredictorReady", "transformer": "TransformerReady", "explainer": "ExplainerReady"}


def _component_not_ready(obj: Obj, component: str) -> str:
    """Why KServe reports the component not ready ("" when it reports it ready); where it has set no condition for
    the component yet (an older status), the resource's `Ready`."""
    wanted = READY_CONDITIONS.get(component)
    for condition in read(obj, ("status", "conditions")) or []:
        if isinstance(condition, Mapping) and condition.get("type") == wanted:
            if condition.get("status") == "True":
                return ""
            return (f"{wanted} is {condition.get('status')}: {condition.get('reason', '')} "
                    f"{condition.get('message', '')}").strip()
    return not_ready(obj)


def _component_surge(obj: Obj, part: Part, child: Obj | None) -> int:
    """Replicas of new pods a change starts for a component KServe rolls alongside the one read (`child` is that
    one's Deployment or Knative Service). Serverless: a new Revision starts every replica. Raw: its own
    `deploymentStrategy` (v0.20.0 deployment_reconciler.go createRawDefaultDeployment: it takes precedence), else the
    strategy KServe gave the read component's Deployment where that one sets none of its own (both then come from the
    same inferenceservice-config default, applyRolloutStrategyFromConfigmap); where neither can be read, every
    replica (never less than KServe may start)."""
    replicas = part.replicas_in(obj) or 0
    raw = not knative.is_service(child) and (isvc_mode(obj) == "Standard" or
                                              (child is not None and child.get("kind") == "Deployment"))
    if not raw:  # serverless, or a mode not known: the whole count, never less
        return replicas
    own = read(obj, (*part.spec_path, "deploymentStrategy"))
    if isinstance(own, Mapping):
        return _rolling_surge(own, replicas)
    if child is not None and child.get("kind") == "Deployment":
        read_component = ((child.get("metadata") or {}).get("labels") or {}).get("component")
        strategy = read(child, ("spec", "strategy"))
        if isinstance(read_component, str) and isinstance(strategy, Mapping) \
                and not isinstance(read(obj, ("spec", read_component, "deploymentStrategy")), Mapping):
            return _rolling_surge(strategy, replicas)
    return replicas


def _rolling_surge(strategy: Mapping[str, Any], replicas: int) -> int:
    """A Deployment strategy's surge (apps/v1 defaults: RollingUpdate, maxSurge 25% rounded up; Recreate none)."""
    if strategy.get("type") == "Recreate":
        return 0
    rolling = strategy.get("rollingUpdate")
    raw = rolling.get("maxSurge", "25%") if isinstance(rolling, Mapping) else "25%"
    if isinstance(raw, str) and raw.endswith("%") and raw[:-1].isdigit():
        return min(replicas, -(-replicas * int(raw[:-1]) // 100))
    return min(replicas, raw) if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else replicas


class InferenceServiceAdapter(Adapter):
    """The predictor, transformer and explainer; run as Deployments (raw mode) or Knative Services (serverless
    mode), whose chain of Knative objects the adapter walks itself (`climb`, knative.py)."""

    # KServe copies the resource's annotations into the pods' template: the reactor's state lives on a Lease.
    state_apart: ClassVar[bool] = True

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        """The predictor, and the transformer and explainer where the resource has them: each a pod spec with
        min/maxReplicas (v1beta1 ComponentExtensionSpec). KServe runs the predictor's implementation (`model`, or a
        framework field such as `sklearn`: each a PredictorExtensionSpec with an inline container) as kserve-container
        (components/predictor.go buildPredictorResources); a custom predictor is its `containers` list."""
        parts = []
        implementations = isvc_implementations(obj)
        for name in ISVC_COMPONENTS:
            if name != "predictor" and not isinstance(read(obj, ("spec", name)), Mapping):
                continue
            model = None
            if name == "predictor" and implementations:
                model = ("kserve-container", ("spec", "predictor", implementations[0]))
            parts.append(Part(name, ("spec", name), ("spec", name, "minReplicas"), ("spec", name, "maxReplicas"),
                              model=model))
        return tuple(parts)

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        """Raw deployment mode: the component's Deployment; serverless mode: its Knative revisions (knative.py)."""
        # Not the resource's status.observedGeneration: KServe copies the Deployment's (or Knative Service's) own
        # counter there (PropagateRawStatus / PropagateStatus), unrelated to the InferenceService's generation.
        behind = not_ready(obj)
        if behind or child is None:
            return behind
        return knative.rollout(obj, child) if knative.is_service(child) else child_rollout(child)

    def refusals(self, obj: Obj, part: Part, gpu_resource: str) -> dict[str, str]:
        out = {**Adapter.refusals(self, obj, part, gpu_resource), **_isvc_part_forbidden(obj, part, gpu_resource)}
        autoscaler = ((obj.get("metadata") or {}).get("annotations") or {}).get(AUTOSCALER_CLASS)
        if autoscaler == "external" and "scale-replicas" not in out:
            out["scale-replicas"] = (f"its {AUTOSCALER_CLASS} is external: KServe makes no autoscaler and leaves the "
                                     f"Deployment's replicas to the one outside it, so a minReplicas write changes "
                                     f"nothing that runs")
        return out

    def running(self, obj: Obj, part: Part, child: Obj | None) -> tuple[int | None, str]:
        """Raw mode: the component's Deployment runs what KServe's HPA or KEDA sets, minReplicas only its floor
        (v0.20.0 deployment_reconciler.go checkDeploymentExist leaves replicas to the autoscaler): where it runs
        more, quota counts that, and a minReplicas write is not the count running, so the reactor does not scale."""
        if child is None or child.get("kind") != "Deployment" \
                or ((child.get("metadata") or {}).get("labels") or {}).get("component", part.name) != part.name:
            return None, ""
        count, floor = (child.get("spec") or {}).get("replicas"), part.replicas_in(obj)
        if not isinstance(count, int) or isinstance(count, bool) or floor is None or count <= floor:
            return None, ""
        return count, (f"KServe's autoscaler runs {count} replicas of the {part.name}, above its minReplicas {floor} "
                       f"(deployment_reconciler.go leaves the Deployment's replicas to it): the count running is the "
                       f"autoscaler's, and a minReplicas write would be measured against it")

    def surge(self, obj: Obj, replicas: int, *, child: Obj | None, child_surge: int) -> int:
        """Serverless mode: a template change makes a new Knative Revision, which starts every replica beside the
        old one; raw mode: the Deployment's maxSurge."""
        return replicas if knative.is_service(child) else child_surge

    def label_beside(self, obj: Obj, part: Part, surge: int, *, child: Obj | None) -> tuple[tuple[Part, int], ...]:
        """Every other component: KServe copies the InferenceService's labels into each one's pod template (v0.20.0
        components/predictor.go buildObjectMeta; serverless ksvc_reconciler.go createKnativeService), so a label
        change rolls them all, each with its own surge (`component_surge`)."""
        return tuple((other, _component_surge(obj, other, child)) for other in self.parts(obj)
                     if other.spec_path != part.spec_path)

    def part_rollout(self, obj: Obj, part: str, child: Obj | None) -> str:
        """The changed component's own readiness, not the resource's `Ready`: KServe sets `<Component>Ready` per
        component (v0.20.0 inference_service_status.go PropagateStatus from its Knative Service's Ready,
        PropagateRawStatus from its Deployment's), while `Ready` waits on the predictor and the ingress, which waits
        on every component (ingress_reconciler.go createIngress): another component's trouble is not this change's,
        and a transformer's rollout is not the predictor's. Serverless, with no child to read, the component's
        revisions as KServe copies them (status.components.<component>: latestCreatedRevision not yet
        latestReadyRevision) say whether its newest Revision is ready (knative.component_behind)."""
        if not part:
            return self.rollout(obj, child)
        serverless = child is not None and knative.is_service(child)
        behind = knative.rollout(obj, child) if child is not None and serverless \
            else knative.component_behind(obj, part)
        return behind or _component_not_ready(obj, part) or ("" if serverless else child_rollout(child))

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.inference_service(owner, child_kind, child)

    def climb(self, child_kind: str, child: Obj, ref: ControllerRef, fetch: Fetch) -> Climb | None:
        """A Revision's Deployment: up Knative's chain to the Knative Service (knative.walk)."""
        if not knative.is_revision_ref(child_kind, ref):
            return None
        return knative.walk(child, ref, lambda plural, name: fetch(knative.GROUP, knative.VERSION, plural, name))


INFERENCE_SERVICE = InferenceServiceAdapter("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices",
                                            frozenset({"Deployment", knative.SERVICE_KIND}),
                                            owner_label="serving.kserve.io/inferenceservice", part_label="component",
                                            reads=tuple((knative.GROUP, p) for p in knative.PLURALS))
