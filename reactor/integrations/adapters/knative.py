"""KServe's serverless mode: the Knative chain between a predictor's pods and its InferenceService.

In serverless mode (KServe's default) KServe creates a Knative Service `<isvc>-<component>`
(serving.knative.dev/v1, controlled by the InferenceService, labelled `serving.kserve.io/inferenceservice`
and `component`); Knative makes from it a Configuration, from each of its generations a Revision, and
from each Revision a Deployment `<revision>-deployment`, both names hashed where they would pass 63 characters
(kmeta.py) (knative/serving pkg/reconciler: service/resources MakeConfiguration, configuration/resources
MakeRevision, revision/resources MakeDeployment). Each hop carries a controller reference to the one above and
Knative's labels naming it and its uid; a hop is believed only when both match the object fetched (a tenant can
write any ownerReference or label, not another object's uid). A Knative `Service` is told apart from a core v1
`Service` by its API group.

The reactor never writes below the InferenceService: KServe would undo a change to the Knative Service,
and Knative never lets a Revision change. Pure: the objects come from a `fetch` the caller provides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactor.core.ownership import ControllerRef, controller_ref
from reactor.integrations.adapters import kmeta
from reactor.integrations.adapters.base import Climb, Obj, read

GROUP, VERSION = "serving.knative.dev", "v1"
SERVICE_KIND = "Service.serving.knative.dev"  # a GroupKind as Kubernetes spells it, never the core Service
# Knative's labels on what it creates (knative/serving pkg/apis/serving/register.go), child kind → owner.
HOPS: tuple[tuple[str, str, str, str, str], ...] = (
    # (child kind, owner kind, owner's plural, label naming the owner, label holding the owner's uid)
    ("Deployment", "Revision", "revisions", "serving.knative.dev/revision", "serving.knative.dev/revisionUID"),
    ("Revision", "Configuration", "configurations", "serving.knative.dev/configuration",
     "serving.knative.dev/configurationUID"),
    ("Configuration", "Service", "services", "serving.knative.dev/service", "serving.knative.dev/serviceUID"),
)
PLURALS = tuple(hop[2] for hop in HOPS)  # what the resolver GETs (and so what RBAC grants it)
COMPONENT_LABEL = "component"  # KServe's label on the Knative Service naming the component

Fetch = Callable[[str, str], Obj | None]  # (plural, name) in the pod's namespace → the object, None if absent


def is_revision_ref(child_kind: str, ref: ControllerRef) -> bool:
    """A Deployment controlled by a Knative Revision (by group, not the kind's name alone)."""
    return child_kind == "Deployment" and ref.kind == "Revision" and ref.group == GROUP


def is_service(obj: Obj | None) -> bool:
    """A Knative Service (not a core v1 Service of the same kind name)."""
    return obj is not None and str(obj.get("apiVersion", "")).rpartition("/")[0] == GROUP and \
        obj.get("kind") == "Service"


def walk(deployment: Obj, ref: ControllerRef, fetch: Fetch) -> Climb:
    """Deployment → Revision → Configuration → Knative Service, every hop believed by uid and Knative's labels."""
    child: Obj = deployment
    up: ControllerRef | None = ref
    for child_kind, kind, plural, name_label, uid_label in HOPS:
        name = str((child.get("metadata") or {}).get("name", ""))
        if up is None or up.kind != kind or up.group != GROUP:
            found = f"{up.kind} ({up.api_version})" if up else "no controller"
            return Climb(failure=f"{child_kind} {name}: its controller is {found}, not Knative's {kind}",
                         stopped_at=(child_kind, name))
        owner = fetch(plural, up.name)
        if owner is None:
            return Climb(failure=f"{child_kind} {name}: its {kind} {up.name} is gone", stopped_at=(kind, up.name))
        failure = hop_failure(child_kind, child, up, owner, name_label, uid_label)
        if failure is not None:
            return Climb(failure=f"{child_kind} {name}: {failure}", stopped_at=(kind, up.name))
        child, up = owner, controller_ref(owner)
    return Climb(top=child, top_kind=SERVICE_KIND, above=up)


def hop_failure(child_kind: str, child: Obj, ref: ControllerRef, owner: Obj, name_label: str,
                uid_label: str) -> str | None:
    """Why `owner` is not the Knative object that made `child`; None when uid and both labels hold."""
    uid = (owner.get("metadata") or {}).get("uid")
    if not uid or uid != ref.uid:
        return f"the ownerReference's uid {ref.uid!r} is not {ref.kind} {ref.name}'s uid"
    labels = (child.get("metadata") or {}).get("labels") or {}
    if labels.get(name_label) != ref.name:
        return f"the {child_kind} lacks the label {name_label}={ref.name} Knative sets"
    if labels.get(uid_label) != uid:
        return f"the {child_kind}'s label {uid_label} is not {ref.kind} {ref.name}'s uid"
    expected = _NAMED.get(child_kind)
    name = str((child.get("metadata") or {}).get("name", ""))
    if expected is not None and name != expected(ref.name):
        return f"Knative names the {child_kind} of {ref.kind} {ref.name} {expected(ref.name)}, not {name}"
    return None


# The owner's side (issue 24): the names Knative gives its children (knative/serving knative-v1.23.0
# pkg/reconciler/revision/resources/names Deployment: kmeta.ChildName(revision, "-deployment"), hashed where
# `<revision>-deployment` would pass 63 characters (kmeta.py); service/resources/names Configuration: the Service's
# name). A Revision's name is the Configuration's choice (configuration/resources/revision.go MakeRevision: the
# template's own, else ChildName(configuration, "-%05d" of its generation), and the template's own is not kept once
# the template changes), so that hop rests on its uid and labels.
_NAMED: dict[str, Callable[[str], str]] = {"Deployment": lambda owner: kmeta.child_name(owner, "-deployment"),
                                           "Configuration": lambda owner: owner}


def rollout(isvc: Obj, service: Obj) -> str:
    """Why the component's serverless rollout is still in progress ("" when it is not): KServe's status of the
    component (latestCreatedRevision not yet latestReadyRevision, kserve PropagateStatus), and the Knative
    Service's own (a generation not yet observed, a created Revision not yet ready)."""
    component = str(((service.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL, ""))
    status = read(isvc, ("status", "components", component))
    if not isinstance(status, Mapping) or not status.get("latestCreatedRevision"):
        return f"KServe has not reported the {component or 'component'}'s Knative revisions yet"
    behind = _revision_behind(f"the {component}", status.get("latestCreatedRevision"),
                              status.get("latestReadyRevision"))
    if behind:
        return behind
    meta, own = service.get("metadata") or {}, service.get("status") or {}
    generation, observed = int(meta.get("generation", 0)), own.get("observedGeneration")
    if isinstance(observed, int) and observed < generation:
        return f"Knative Service {meta.get('name')}: generation {generation} observed {observed}"
    return _revision_behind(f"Knative Service {meta.get('name')}", own.get("latestCreatedRevisionName"),
                            own.get("latestReadyRevisionName"))


def component_behind(isvc: Obj, component: str) -> str:
    """Why the component's newest Revision is not ready yet, as KServe copies its Knative Service's status into the
    InferenceService (kserve v0.20.0 inference_service_status.go PropagateStatus: status.components.<component>
    latestCreatedRevision, latestReadyRevision); "" when it is, or where KServe reports no revisions (raw mode)."""
    status = read(isvc, ("status", "components", component))
    if not isinstance(status, Mapping):
        return ""
    return _revision_behind(f"the {component}", status.get("latestCreatedRevision"), status.get("latestReadyRevision"))


def _revision_behind(what: str, created: Any, ready: Any) -> str:
    if created and created != ready:
        return f"{what}: Revision {created} is not ready yet (latest ready: {ready or 'none'})"
    return ""

