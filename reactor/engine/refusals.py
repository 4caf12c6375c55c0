"""Refusals the engine gives before a workload is decided: the notification's deadline, and an owner the
reactor cannot act on (gone, unverified, an operator's refusal, a kind it does not change).

Shared by the notification path (core.py) and the rebalancing steps, which resolve donors' pods the same way.
"""

from __future__ import annotations

from reactor.cluster.adapted import adapted_refusal
from reactor.core.model import Alert, Skip, SkipReason
from reactor.integrations.adapters import Adapters
from reactor.policy import owner_refusal
from reactor.resolve.owners import Owner

# Answered 200, not 503: a retry would meet the same work and the same deadline. The group is sent
# again at its next group_interval while it fires, and workloads decided this time then refuse early.
DEADLINE = Skip(SkipReason.DEADLINE_EXCEEDED, "the notification's deadline (server.notificationDeadline) passed "
                                               "before this alert was decided")


def owner_skip(alert: Alert, owner: Owner | None, adapters: Adapters) -> Skip | None:
    if owner is None:
        return Skip(SkipReason.NOT_FOUND, f"pod {alert.namespace}/{alert.pod} does not exist (replaced or deleted)")
    if owner.unverified:
        return Skip(SkipReason.OWNER_UNVERIFIED, owner.unverified)
    adapter = adapters.get(owner.ref.kind)
    if adapter is not None and owner.obj is not None:
        return adapted_refusal(adapter, owner)
    refused = owner_refusal(owner.ref.kind, owner.ref.name)
    if (refused is None or adapter is not None) and owner.obj is None:
        return Skip(SkipReason.UNSUPPORTED_OWNER, f"owned by {owner.ref.kind} {owner.ref.name}, which is being deleted")
    return refused
