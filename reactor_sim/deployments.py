"""The Deployment controller: one ReplicaSet per pod template (`<deploy>-<pod-template-hash>`),
rolling updates bounded by maxSurge (rounded up) and maxUnavailable (rounded down), and status.

It scales ReplicaSets only (pods are the ReplicaSet controller's business) and, once a rollout is
complete, deletes scaled-down ReplicaSets beyond `revisionHistoryLimit`. A rolling update follows
kube-controller-manager's pkg/controller/deployment/rolling.go step by step (`_roll`): the new ReplicaSet is
the one whose template equals the Deployment's (`FindNewReplicaSet`, `EqualIgnoreHash`), so a template put
back to an older one (a rollback, the reactor's revert) makes that older ReplicaSet the new one again, and the
unavailable pods of the others (a stalled raise's Pending pods) are removed first (`cleanupUnhealthyReplicas`).
"""

from __future__ import annotations

import copy
import math
from typing import Any

from reactor_sim.objects import drop_condition, set_condition, timestamp
from reactor_sim.operations import Api
from reactor_sim.ownership import controlled_by, owner_ref, template_hash

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"


def sync_all(api: Api) -> None:
    for deploy in api.store.items("deployments"):
        sync(api, deploy)


def _percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def surge_and_unavailable(deploy: Obj) -> tuple[int, int]:
    """ResolveFenceposts: surge rounds up, unavailable down; both zero would deadlock, so 1 unavailable."""
    spec = deploy["spec"]
    if (spec.get("strategy") or {}).get("type") == "Recreate":
        return 0, int(spec.get("replicas", 1))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    desired = int(spec.get("replicas", 1))
    surge = _percent(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = _percent(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    return surge, (1 if surge == 0 and unavailable == 0 else unavailable)


def replica_sets(api: Api, deploy: Obj) -> list[Obj]:
    return [copy.deepcopy(rs) for _, rs in api.store.dependents(deploy["metadata"]["uid"], "replicasets")
            if controlled_by(rs, deploy)]


def sync(api: Api, deploy: Obj) -> None:
    rss = replica_sets(api, deploy)
    if not deploy["spec"].get("paused"):
        new_rs = find_new(deploy, rss)
        old = [rs for rs in rss if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        if new_rs is None:
            new_rs = _create_rs(api, deploy, template_hash(deploy["spec"]["template"]), rss)
        else:
            _refresh_new_rs(api, deploy, new_rs, old)
        _roll(api, deploy, new_rs, old)
    _write_status(api, deploy)
    _clean_up_history(api, deploy)


def equal_ignore_hash(one: Obj, other: Obj) -> bool:
    """EqualIgnoreHash (deployment/util/deployment_util.go): two pod templates alike but for the
    `pod-template-hash` label."""
    def bare(template: Obj) -> Obj:
        out = copy.deepcopy(template)
        labels = (out.get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            labels.pop(HASH_LABEL, None)
        return out
    return bare(one) == bare(other)


def find_new(deploy: Obj, rss: list[Obj]) -> Obj | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's; None if there is none."""
    ordered = sorted(rss, key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]))
    return next((rs for rs in ordered if equal_ignore_hash(rs["spec"]["template"], deploy["spec"]["template"])), None)


def revision(rs: Obj) -> int:
    return int((rs["metadata"].get("annotations") or {}).get(REVISION, 0))


def _refresh_new_rs(api: Api, deploy: Obj, rs: Obj, old: list[Obj]) -> None:
    """SetNewReplicaSetAnnotations: a template seen before (a rollback, a revert) is the newest revision
    again and its earlier number goes to `revision-history`; minReadySeconds follows the Deployment."""
    changed = False
    want = 1 + max([revision(r) for r in old] or [0])
    annotations = rs["metadata"].setdefault("annotations", {})
    if revision(rs) < want:
        if REVISION in annotations:
            history = [h for h in annotations.get(REVISION_HISTORY, "").split(",") if h]
            annotations[REVISION_HISTORY] = ",".join([*history, annotations[REVISION]])
        annotations[REVISION] = str(want)
        changed = True
    min_ready = int(deploy["spec"].get("minReadySeconds", 0))
    if int(rs["spec"].get("minReadySeconds", 0)) != min_ready:
        rs["spec"]["minReadySeconds"] = min_ready
        _bump_generation(rs)
        changed = True
    if changed:
        rs.update(api.controller_write("replicasets", rs))


def _complete(deploy: Obj) -> bool:
    """DeploymentComplete: every desired replica updated and available, the latest spec observed."""
    status, desired = deploy.get("status") or {}, int(deploy["spec"].get("replicas", 1))
    return (status.get("updatedReplicas", 0) == status.get("replicas", 0) == status.get("availableReplicas", 0)
            == desired and int(status.get("observedGeneration", 0)) >= int(deploy["metadata"].get("generation", 1)))


def _clean_up_history(api: Api, deploy: Obj) -> None:
    """cleanupDeployment: once a rollout is complete, delete the oldest scaled-down ReplicaSets beyond
    revisionHistoryLimit (lowest revision first); one still holding pods is skipped, never deleted."""
    current = api.store.get("deployments", deploy["metadata"]["namespace"], deploy["metadata"]["name"])
    if current is None or current["spec"].get("revisionHistoryLimit") is None or not _complete(current):
        return
    rss = replica_sets(api, current)
    new_rs = find_new(current, rss)
    old = [rs for rs in rss if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
    excess = len(old) - int(current["spec"]["revisionHistoryLimit"])
    for rs in sorted(old, key=lambda r: (revision(r), r["metadata"]["creationTimestamp"]))[:max(0, excess)]:
        status = rs.get("status") or {}
        if int(rs["spec"].get("replicas", 0)) or int(status.get("replicas", 0)) \
                or int(status.get("observedGeneration", 0)) < int(rs["metadata"].get("generation", 1)):
            continue
        api.delete(api.registry.by_plural("replicasets"), rs["metadata"]["namespace"], rs["metadata"]["name"])


def _create_rs(api: Api, deploy: Obj, key: str, existing: list[Obj]) -> Obj:
    template = copy.deepcopy(deploy["spec"]["template"])
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = key
    selector = copy.deepcopy(deploy["spec"]["selector"])
    selector.setdefault("matchLabels", {})[HASH_LABEL] = key
    number = 1 + max([revision(rs) for rs in existing] or [0])
    rs: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": f"{deploy['metadata']['name']}-{key}", "namespace": deploy["metadata"]["namespace"],
                       "labels": dict(template["metadata"]["labels"]), "ownerReferences": [owner_ref(deploy)],
                       "annotations": {REVISION: str(number),
                                       "deployment.kubernetes.io/desired-replicas": str(deploy["spec"]["replicas"])}},
          "spec": {"replicas": 0, "selector": selector, "template": template}}
    if deploy["spec"].get("minReadySeconds"):
        rs["spec"]["minReadySeconds"] = int(deploy["spec"]["minReadySeconds"])
    return api.create(api.registry.by_plural("replicasets"), deploy["metadata"]["namespace"], rs)


def _scale(api: Api, rs: Obj, replicas: int) -> bool:
    """Whether it changed the ReplicaSet's replicas (scaleReplicaSetAndRecordEvent's `scaled`)."""
    if int(rs["spec"].get("replicas", 0)) == replicas:
        return False
    rs["spec"]["replicas"] = replicas
    stored = api.controller_write("replicasets", _bump_generation(rs))
    rs.update(stored)
    return True


def _bump_generation(rs: Obj) -> Obj:
    rs["metadata"]["generation"] = int(rs["metadata"].get("generation", 1)) + 1
    return rs


def _available(rs: Obj) -> int:
    return int((rs.get("status") or {}).get("availableReplicas", 0))


def _roll(api: Api, deploy: Obj, new_rs: Obj, old: list[Obj]) -> None:
    if (deploy["spec"].get("strategy") or {}).get("type") == "Recreate":
        desired = int(deploy["spec"].get("replicas", 1))
        for rs in old:
            _scale(api, rs, 0)
        if all(int((rs.get("status") or {}).get("replicas", 0)) == 0 for rs in old):
            _scale(api, new_rs, desired)
        return
    # rolloutRolling: scale the new ReplicaSet up if it may; only when it did not, scale the old ones down.
    if not _reconcile_new(api, deploy, new_rs, old):
        _reconcile_old(api, deploy, new_rs, [rs for rs in old if _replicas(rs)])  # FilterActiveReplicaSets
    _annotate_revision(api, deploy, new_rs)


def _replicas(rs: Obj) -> int:
    return int(rs["spec"].get("replicas", 0))


def _reconcile_new(api: Api, deploy: Obj, new_rs: Obj, old: list[Obj]) -> bool:
    """reconcileNewReplicaSet with NewRSNewReplicas: down to the desired count at once, up within maxSurge."""
    desired, current = int(deploy["spec"].get("replicas", 1)), _replicas(new_rs)
    if current == desired:
        return False
    if current > desired:
        return _scale(api, new_rs, desired)
    surge, _ = surge_and_unavailable(deploy)
    pods = sum(_replicas(rs) for rs in [new_rs, *old])
    if pods >= desired + surge:
        return False
    return _scale(api, new_rs, current + min(desired + surge - pods, desired - current))


def _reconcile_old(api: Api, deploy: Obj, new_rs: Obj, old: list[Obj]) -> bool:
    """reconcileOldReplicaSets: what may go (maxScaledDown = all pods − minAvailable − the new ReplicaSet's
    unavailable pods) goes first from the old ReplicaSets' unavailable pods, then from their available ones while
    more than minAvailable pods stay available."""
    if not sum(_replicas(rs) for rs in old):
        return False
    desired = int(deploy["spec"].get("replicas", 1))
    _, unavailable = surge_and_unavailable(deploy)
    min_available = desired - min(unavailable, desired)  # MaxUnavailable: never more than the replicas
    every = [new_rs, *old]
    max_scaled_down = sum(_replicas(rs) for rs in every) - min_available - (_replicas(new_rs) - _available(new_rs))
    if max_scaled_down <= 0:
        return False
    cleaned = _clean_up_unhealthy(api, old, max_scaled_down)
    return cleaned + _scale_down_old(api, new_rs, old, min_available) > 0


def _oldest_first(rss: list[Obj]) -> list[Obj]:
    """ReplicaSetsByCreationTimestamp: by creation time, then name."""
    return sorted(rss, key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]))


def _clean_up_unhealthy(api: Api, old: list[Obj], most: int) -> int:
    """cleanupUnhealthyReplicas: each old ReplicaSet loses its unavailable replicas (the ReplicaSet controller
    deletes not-ready pods first), `most` in all."""
    done = 0
    for rs in _oldest_first(old):
        if done >= most:
            break
        replicas = _replicas(rs)
        if replicas == 0 or replicas == _available(rs):
            continue
        cut = min(most - done, replicas - _available(rs))
        _scale(api, rs, replicas - cut)
        done += cut
    return done


def _scale_down_old(api: Api, new_rs: Obj, old: list[Obj], min_available: int) -> int:
    """scaleDownOldReplicaSetsForRollingUpdate: the available pods beyond minAvailable, oldest ReplicaSet first."""
    available = sum(_available(rs) for rs in [new_rs, *old])
    if available <= min_available:
        return 0
    done, wanted = 0, available - min_available
    for rs in _oldest_first(old):
        if done >= wanted:
            break
        replicas = _replicas(rs)
        if replicas == 0:
            continue
        cut = min(replicas, wanted - done)
        _scale(api, rs, replicas - cut)
        done += cut
    return done


def _annotate_revision(api: Api, deploy: Obj, new_rs: Obj) -> None:
    revision = (new_rs["metadata"].get("annotations") or {}).get(REVISION)
    current = api.store.get("deployments", deploy["metadata"]["namespace"], deploy["metadata"]["name"])
    if current and revision and (current["metadata"].get("annotations") or {}).get(REVISION) != revision:
        current["metadata"].setdefault("annotations", {})[REVISION] = revision
        api.controller_write("deployments", current)


def _write_status(api: Api, deploy: Obj) -> None:
    current = api.store.get("deployments", deploy["metadata"]["namespace"], deploy["metadata"]["name"])
    if current is None:
        return
    rss = replica_sets(api, current)
    new_rs = find_new(current, rss)
    st = lambda rs, f: int((rs.get("status") or {}).get(f, 0))  # noqa: E731
    desired = int(current["spec"].get("replicas", 1))
    status: Obj = {"observedGeneration": current["metadata"].get("generation", 1),
                   "replicas": sum(st(rs, "replicas") for rs in rss),
                   "updatedReplicas": st(new_rs, "replicas") if new_rs else 0,
                   "readyReplicas": sum(st(rs, "readyReplicas") for rs in rss),
                   "availableReplicas": sum(st(rs, "availableReplicas") for rs in rss)}
    status["unavailableReplicas"] = max(0, max(desired, status["replicas"]) - status["availableReplicas"])
    status = {k: v for k, v in status.items() if v or k == "observedGeneration"}
    status["conditions"] = _conditions(api, current, new_rs, status, desired)
    if current.get("status") != status:
        current["status"] = status
        api.controller_write("deployments", current)


def _conditions(api: Api, deploy: Obj, new_rs: Obj | None, status: Obj, desired: int) -> list[Obj]:
    now = timestamp(api.clock)
    conds = (deploy.get("status") or {}).get("conditions") or []
    _, unavailable = surge_and_unavailable(deploy)
    if status.get("availableReplicas", 0) >= desired - unavailable:
        conds = set_condition(conds, "Available", "True", "MinimumReplicasAvailable",
                              "Deployment has minimum availability.", now, update_time=True)
    else:
        conds = set_condition(conds, "Available", "False", "MinimumReplicasUnavailable",
                              "Deployment does not have minimum availability.", now, update_time=True)
    name = new_rs["metadata"]["name"] if new_rs else ""
    done = (status.get("updatedReplicas", 0) == desired == status.get("replicas", 0)
            == status.get("availableReplicas", 0))
    reason, msg = ("NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.') if done \
        else ("ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.')
    conds = set_condition(conds, "Progressing", "True", reason, msg, now, update_time=True)
    failure = next((c for c in ((new_rs or {}).get("status") or {}).get("conditions") or []
                    if c.get("type") == "ReplicaFailure"), None)
    if failure:
        return set_condition(conds, "ReplicaFailure", "True", "FailedCreate", failure["message"], now,
                             update_time=True)
    return drop_condition(conds, "ReplicaFailure")
