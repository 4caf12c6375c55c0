"""The engine: one notification in, one outcome per alert out.

`NotificationHandler` (notifications.py) screens, resolves and groups a notification's alerts; the
`WorkloadDecider` (decider.py) reads, decides and acts for one workload; `Rebalancing` (rebalancing.py) and
`GiveBacks` (givebacks.py) move GPUs between workloads of one quota. The application assembly
(reactor/app/assembly.py) builds each part and hands it its collaborators.
"""

from datetime import UTC, datetime

from reactor.engine.notifications import NotificationHandler

__all__ = ["NotificationHandler", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)
