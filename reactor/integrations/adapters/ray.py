"""KubeRay: RayCluster v1 (the head template and each worker group's template and replicas; KubeRay creates the
pods itself, labelled `ray.io/group`) and RayService v1 (the same templates under spec.rayClusterConfig, reached
through the RayCluster KubeRay builds from it). Follows the operator's published CRDs (tests/fixtures/crds).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import Adapter, Obj, Part, read
from reactor.integrations.adapters.status import TEMPLATE_FIELDS, observed_behind, positive

RAY_HEAD = naming.RAY_HEAD  # KubeRay's ray.io/group label value on the head pod


def _ray_parts(obj: Obj, base: tuple[str, ...] = ("spec",)) -> tuple[Part, ...]:
    """The head and each worker group; a group's replica is `numOfHosts` pods (kuberay v1.7.0 utils
    GetWorkerGroupDesiredReplicas: replicas × numOfHosts), kept between minReplicas and maxReplicas."""
    head = Part(RAY_HEAD, (*base, "headGroupSpec", "template", "spec"), default_replicas=1)
    groups = read(obj, (*base, "workerGroupSpecs")) or []
    workers = tuple(
        Part(str(g.get("groupName", "")), (*base, "workerGroupSpecs", i, "template", "spec"),
             (*base, "workerGroupSpecs", i, "replicas"), (*base, "workerGroupSpecs", i, "maxReplicas"),
             default_replicas=0, pods=positive(g.get("numOfHosts")),
             min_replicas_path=(*base, "workerGroupSpecs", i, "minReplicas"))
        for i, g in enumerate(groups) if isinstance(g, Mapping)
    )
    return (head, *workers)


def _ray_rollout(obj: Obj, child: Obj | None) -> str:
    state: Any = (obj.get("status") or {}).get("state")
    behind = observed_behind(obj)
    if behind:
        return behind
    for condition in read(obj, ("status", "conditions")) or []:  # v1.7 conditions; `state` is deprecated
        if isinstance(condition, Mapping) and condition.get("type") in ("RayClusterProvisioned", "HeadPodReady") \
                and condition.get("status") == "False":
            return f"{condition.get('type')} is False: {condition.get('reason', '')}".strip()
    return f"the RayCluster's state is {state!r}, not 'ready'" if state not in (None, "ready") else ""


RECREATE_WHY = ("KubeRay recreates a RayCluster's pods for a template change only with spec.upgradeStrategy.type "
                "Recreate (v1.7.0 raycluster_controller shouldRecreatePodsForUpgrade); without it the change is "
                "written and no running pod ever gets it")


# Set by people on one RayCluster: they accept that each template change restarts the whole cluster. It lifts only
# the refusal below (every other rail and the mode still hold); a tenant who sets it restarts only their own cluster.
ALLOW_RECREATE = "gpu-reactor.io/allow-recreate"
RECREATE_EFFECT = ("KubeRay's upgradeStrategy Recreate deletes every pod of the RayCluster, head included, and "
                   "creates them anew (v1.7.0 raycluster_controller shouldRecreatePodsForUpgrade): every running Ray "
                   "job on it stops")
RECREATE_UNCONFIRMED = (f"{RECREATE_EFFECT}; the reactor makes such a change only on a RayCluster annotated "
                        f"{ALLOW_RECREATE}: \"true\" (set by people who accept the restart), so it only recommends")


class RayClusterAdapter(Adapter):
    """The head and the worker groups; KubeRay makes the pods itself and carries a template change to them only
    when told to recreate them."""

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        return _ray_parts(obj)

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        return _ray_rollout(obj, child)

    def forbidden(self, obj: Obj) -> dict[str, str]:
        """What KubeRay never carries to a running RayCluster's pods: a template change without `upgradeStrategy.type:
        Recreate` (and with it, every pod, head included, is deleted at once: the README says so), and replicas the
        in-tree autoscaler owns (it writes `replicas` itself)."""
        out: dict[str, str] = {}
        if read(obj, ("spec", "upgradeStrategy", "type")) != "Recreate":
            out.update({field: RECREATE_WHY for field in TEMPLATE_FIELDS})
        elif ((obj.get("metadata") or {}).get("annotations") or {}).get(ALLOW_RECREATE) != "true":
            out.update({field: RECREATE_UNCONFIRMED for field in TEMPLATE_FIELDS})
        if read(obj, ("spec", "enableInTreeAutoscaling")) is True:
            out["scale-replicas"] = ("enableInTreeAutoscaling is true: the Ray autoscaler writes the worker groups' "
                                     "replicas and would overwrite the reactor's")
        return out

    def effect(self, obj: Obj) -> str:
        return RECREATE_EFFECT if read(obj, ("spec", "upgradeStrategy", "type")) == "Recreate" else ""

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.ray_cluster(owner, child_kind, child)


RAY_CLUSTER = RayClusterAdapter("RayCluster", "ray.io", "v1", "rayclusters", frozenset({"Pod"}),
                                owner_label="ray.io/cluster", part_label="ray.io/group")

# --- RayService v1: its RayClusters are built from spec.rayClusterConfig ------------------------------------

RAY_SERVICE_CONFIG = ("spec", "rayClusterConfig")
# KubeRay's labels on the RayClusters a RayService creates (ray-operator utils: RayOriginatedFromCR*LabelKey).
RAY_ORIGIN_NAME, RAY_ORIGIN_KIND = "ray.io/originated-from-cr-name", "ray.io/originated-from-crd"


INCREMENTAL = "NewClusterWithIncrementalUpgrade"


@dataclass(frozen=True)
class RayServiceAdapter(Adapter):
    """The RayCluster templates under spec.rayClusterConfig. A template change brings up a whole new RayCluster before
    the old one goes (a zero-downtime upgrade): every replica of the part is surge while both run.
    `incremental_gate`: what the policy declares of KubeRay's RayServiceIncrementalUpgrade gate (None: undeclared)."""

    incremental_gate: bool | None = None
    zero_downtime: bool | None = None  # KubeRay's ENABLE_ZERO_DOWNTIME as the policy declares it (None: undeclared)

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        return _ray_parts(obj, RAY_SERVICE_CONFIG)

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        """KubeRay's own rollout: a zero-downtime upgrade (a pending RayCluster prepared, then switched to), a
        RayService with no active RayCluster yet, or its active RayCluster not ready."""
        behind = observed_behind(obj)
        if behind:
            return behind
        conditions = read(obj, ("status", "conditions"))
        # A rollback (kuberay v1.7.0 rayservice_controller.go: the goal reverted or changed mid-upgrade) runs while
        # UpgradeInProgress is still True: named first, it says why the wait lasts.
        for kind in ("RollbackInProgress", "UpgradeInProgress"):
            for condition in conditions if isinstance(conditions, list) else []:
                if isinstance(condition, Mapping) and condition.get("type") == kind \
                        and condition.get("status") == "True":
                    return f"{kind}: {condition.get('reason', '')} {condition.get('message', '')}".strip()
        pending = read(obj, ("status", "pendingServiceStatus", "rayClusterName"))
        if pending:
            return f"KubeRay is preparing the pending RayCluster {pending} (a zero-downtime upgrade)"
        active = read(obj, ("status", "activeServiceStatus", "rayClusterName"))
        if not active:
            return "the RayService has no active RayCluster yet"
        # The pod's own RayCluster counts only when it is the active one: a retired one (awaiting KubeRay's deletion
        # delay) is not the RayService's rollout, and a resolve on its pods must still reach the revert.
        if child is not None and (child.get("metadata") or {}).get("name") == active:
            return _ray_rollout(child, None)
        return ""

    def forbidden(self, obj: Obj) -> dict[str, str]:
        """What KubeRay never carries from rayClusterConfig to a pod (ray-operator rayservice_controller:
        shouldUpdateCluster, shouldPrepareNewCluster): the cluster hash leaves worker replicas out, so a replicas
        change reaches no RayCluster; a template change reaches pods only through a new RayCluster, which upgrade
        strategy None never prepares.

        `NewClusterWithIncrementalUpgrade` depends on the operator's feature gate RayServiceIncrementalUpgrade (kuberay
        v1.7.0 ray-operator/pkg/features/features.go; on by default there, off by default before v1.7): with it off,
        rayservice_controller.go isZeroDowntimeUpgradeEnabled returns false for any type but NewCluster, so KubeRay
        prepares no new RayCluster, as with None. The gate is a flag of the operator's process, invisible through the
        API: `incremental_gate` is what the policy declares (adapters.rayServiceIncrementalUpgrade); undeclared, a
        template change on such a RayService is refused rather than guessed. The same for an unset upgradeStrategy.type:
        KubeRay then follows its ENABLE_ZERO_DOWNTIME environment variable (`zero_downtime`,
        adapters.rayServiceZeroDowntime)."""
        out = {"scale-replicas": "KubeRay does not carry a worker group's replicas from rayClusterConfig to the "
                                 "running RayCluster (its cluster hash leaves replicas out; the Ray autoscaler owns "
                                 "them)"}
        strategy = read(obj, ("spec", "upgradeStrategy", "type"))
        why = ""
        if strategy == "None":
            why = ("its upgradeStrategy.type is None: KubeRay prepares no new RayCluster, so a template change never "
                   "reaches a pod")
        elif strategy == INCREMENTAL and self.incremental_gate is False:
            why = (f"its upgradeStrategy.type is {INCREMENTAL} and the policy declares KubeRay's "
                   f"RayServiceIncrementalUpgrade gate off: KubeRay then prepares no new RayCluster, as with None "
                   f"(rayservice_controller.go isZeroDowntimeUpgradeEnabled), so a template change never reaches a pod")
        elif strategy is None and self.zero_downtime is False:
            why = ("its upgradeStrategy.type is unset and the policy declares KubeRay's ENABLE_ZERO_DOWNTIME false: "
                   "KubeRay then prepares no new RayCluster (rayservice_controller.go isZeroDowntimeUpgradeEnabled), "
                   "so a template change never reaches a pod")
        elif strategy is None and self.zero_downtime is None:
            why = ("its upgradeStrategy.type is unset: KubeRay then upgrades it only if its ENABLE_ZERO_DOWNTIME is "
                   "not \"false\" (rayservice_controller.go isZeroDowntimeUpgradeEnabled), and otherwise no template "
                   "change ever reaches a pod; the operator's environment is not visible through the API, so declare "
                   "it in the policy (adapters.rayServiceZeroDowntime) or set upgradeStrategy.type NewCluster")
        elif strategy == INCREMENTAL and self.incremental_gate is None:
            why = (f"its upgradeStrategy.type is {INCREMENTAL}: KubeRay upgrades it only with its feature gate "
                   f"RayServiceIncrementalUpgrade on, and otherwise never reaches a pod (as with None); the gate is "
                   f"not visible through the API, so declare it in the policy (adapters.rayServiceIncrementalUpgrade)")
        if why:
            out.update({field: why for field in TEMPLATE_FIELDS})
        return out

    def surge(self, obj: Obj, replicas: int, *, child: Obj | None, child_surge: int) -> int:
        return replicas

    def surge_beside(self, obj: Obj, part: Part, surge: int) -> tuple[tuple[Part, int], ...]:
        """The whole new RayCluster: KubeRay builds it from the whole of rayClusterConfig (v1.7.0
        rayservice_controller.go constructRayClusterForRayService: `clusterSpec := rayService.Spec.RayClusterSpec`),
        so the head and every other group start at their full replicas beside the active cluster."""
        return tuple((other, 1 if other.replicas_path is None else other.replicas_in(obj) or 0)
                     for other in self.parts(obj) if other.spec_path != part.spec_path)

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.ray_service(owner, child_kind, child)


RAY_SERVICE = RayServiceAdapter("RayService", "ray.io", "v1", "rayservices", frozenset({"RayCluster"}),
                                owner_label=RAY_ORIGIN_NAME, part_label="ray.io/group",
                                child_labels=((RAY_ORIGIN_KIND, "RayService"),))
