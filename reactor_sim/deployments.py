"""The Deployment controller: one ReplicaSet per pod template (`<deploy>-<pod-template-hash>`),
rolling updates bounded by maxSurge (rounded up) and maxUnavailable (rounded down), and status.

It scales ReplicaSets only (pods are the ReplicaSet controller's business) and, once a rollout is
complete, deletes scaled-down ReplicaSets beyond `revisionHistoryLimit`.
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
        template_key = template_hash(deploy["spec"]["template"])
        new_rs = next((rs for rs in rss if rs["metadata"]["labels"].get(HASH_LABEL) == template_key), None)
        old = [rs for rs in rss if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        if new_rs is None:
            new_rs = _create_rs(api, deploy, template_key, rss)
        else:
            _refresh_new_rs(api, deploy, new_rs, old)
        _roll(api, deploy, new_rs, old)
    _write_status(api, deploy)
    _clean_up_history(api, deploy)


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
    key = template_hash(current["spec"]["template"])
    old = [rs for rs in replica_sets(api, current) if rs["metadata"]["labels"].get(HASH_LABEL) != key]
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


def _scale(api: Api, rs: Obj, replicas: int) -> None:
    if int(rs["spec"].get("replicas", 0)) != replicas:
        rs["spec"]["replicas"] = replicas
        stored = api.controller_write("replicasets", _bump_generation(rs))
        rs.update(stored)


def _bump_generation(rs: Obj) -> Obj:
    rs["metadata"]["generation"] = int(rs["metadata"].get("generation", 1)) + 1
    return rs


def _available(rs: Obj) -> int:
    return int((rs.get("status") or {}).get("availableReplicas", 0))


def _roll(api: Api, deploy: Obj, new_rs: Obj, old: list[Obj]) -> None:
    desired = int(deploy["spec"].get("replicas", 1))
    surge, unavailable = surge_and_unavailable(deploy)
    if (deploy["spec"].get("strategy") or {}).get("type") == "Recreate":
        for rs in old:
            _scale(api, rs, 0)
        if all(int((rs.get("status") or {}).get("replicas", 0)) == 0 for rs in old):
            _scale(api, new_rs, desired)
        return
    total = sum(int(rs["spec"].get("replicas", 0)) for rs in [new_rs, *old])
    room = desired + surge - total
    new_count = int(new_rs["spec"].get("replicas", 0))
    target = min(desired, new_count + max(room, 0)) if new_count < desired else desired
    _scale(api, new_rs, target)
    available = sum(_available(rs) for rs in [new_rs, *old])
    can_remove = max(0, available - (desired - unavailable))
    for rs in sorted(old, key=lambda r: r["metadata"]["creationTimestamp"]):
        cut = min(int(rs["spec"].get("replicas", 0)), can_remove)
        if cut:
            _scale(api, rs, int(rs["spec"]["replicas"]) - cut)
            can_remove -= cut
    _annotate_revision(api, deploy, new_rs)


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
    key = template_hash(current["spec"]["template"])
    new_rs = next((rs for rs in rss if rs["metadata"]["labels"].get(HASH_LABEL) == key), None)
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
