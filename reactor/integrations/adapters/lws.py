"""LeaderWorkerSet v1: the leader and worker templates, `replicas` groups; the leader StatefulSet is the LWS's, each
group's worker StatefulSet is its leader pod's (a hop the adapter declares). Follows the operator's published CRD
(tests/fixtures/crds). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import Adapter, Obj, Part, read
from reactor.integrations.adapters.status import TEMPLATE_FIELDS, child_rollout, positive

LWS_NAME = naming.LWS_NAME
LWS_WORKER_INDEX = naming.LWS_WORKER_INDEX


class LeaderWorkerSetAdapter(Adapter):
    """The leader and worker templates, scaled together in groups; LWS rolls groups out itself (maxSurge)."""

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        """A leader's template is leaderTemplate where set, else workerTemplate: a change there reaches the group.
        A replica is a group of `size` pods: the leader and size − 1 workers (without a leaderTemplate all `size`
        are made from workerTemplate)."""
        base = ("spec", "leaderWorkerTemplate")
        size = positive(read(obj, (*base, "size")))
        if isinstance(read(obj, (*base, "leaderTemplate")), Mapping):
            return (Part("leader", (*base, "leaderTemplate", "spec"), ("spec", "replicas"), pods=1),
                    Part("worker", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=max(1, size - 1)))
        return (Part("leader", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=size),
                Part("worker", (*base, "workerTemplate", "spec"), ("spec", "replicas"), pods=size))

    def part_of_pod(self, pod_labels: Mapping[str, Any]) -> str:
        return "leader" if str(pod_labels.get(LWS_WORKER_INDEX, "")) == "0" else "worker"

    def surge(self, obj: Obj, replicas: int, *, child: Obj | None, child_surge: int) -> int:
        """Groups a rolling update starts beside the old ones: rolloutStrategy.rollingUpdateConfiguration.maxSurge
        (an int or a percentage of replicas rounded up, capped at replicas; default 0), as lws v0.10.0
        constructLeaderStatefulSetApplyConfiguration scales it."""
        raw = read(obj, ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"))
        if isinstance(raw, str) and raw.endswith("%") and raw[:-1].isdigit():
            surge = -(-replicas * int(raw[:-1]) // 100)
        else:
            surge = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
        return max(0, min(surge, replicas))

    def surge_beside(self, obj: Obj, part: Part, surge: int) -> tuple[tuple[Part, int], ...]:
        """A surge group is whole: its leader and size − 1 workers (lws v0.10.0 pod_controller.go
        constructWorkerStatefulSetApplyConfiguration builds the workers of every leader pod, surge leaders
        included), so with a leaderTemplate the other template's pods start with each surge group too."""
        return tuple((other, surge) for other in self.parts(obj) if other.spec_path != part.spec_path) if surge else ()

    def forbidden(self, obj: Obj) -> dict[str, str]:
        """A template change on an LWS with rollingUpdateConfiguration.partition above 0 is refused: LWS rolls only
        the groups whose index is at or above the partition (v0.10.0 leaderworkerset_controller.go
        rollingUpdateParameters passes it to the leader StatefulSet's rolling update); the groups below keep the old
        template, so the change never lands on all of them, the verifier would wait for a rollout that never ends
        and revert it, restarting the groups that did roll a second time. Following a partial rollout would need a
        verifier that judges some groups and not others; the partition is a person's staged rollout, not the
        reactor's to finish."""
        partition = read(obj, ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "partition"))
        if not isinstance(partition, int) or isinstance(partition, bool) or partition <= 0:
            return {}
        why = (f"its rolloutStrategy.rollingUpdateConfiguration.partition is {partition}: LWS updates only the groups "
               f"with index {partition} and above (leaderworkerset_controller.go rollingUpdateParameters), so groups "
               f"0–{partition - 1} never get the change, and the reactor's verifier would revert it after restarting "
               f"the groups that did roll")
        return {field: why for field in TEMPLATE_FIELDS}

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if isinstance(condition, Mapping) and condition.get("type") in ("UpdateInProgress", "Progressing") \
                    and condition.get("status") == "True":
                return f"{condition.get('type')}: {condition.get('reason', '')} {condition.get('message', '')}".strip()
        return child_rollout(child)

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.leader_worker_set(owner, child_kind, child)

    def names_hop(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.lws_worker_hop(owner, child_kind, child)

    def makes_below(self, resource: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.lws_worker_made(resource, child_kind, child)


LEADER_WORKER_SET = LeaderWorkerSetAdapter("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                                           frozenset({"StatefulSet"}), owner_label=LWS_NAME,
                                           hops=frozenset({("StatefulSet", "Pod")}))
