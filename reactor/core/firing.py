"""What rebalancing asks of a source of firing alerts (Alertmanager's API v2: reactor/sources/alertmanager.py).

A structural Protocol, so the engine and the tests depend on the question, never on one client.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from reactor.core.model import Alert


class FiringAlerts(Protocol):
    def firing(self, namespace: str, alertnames: Collection[str]) -> Sequence[Alert]:
        """Alerts active now (not silenced, not inhibited) in `namespace` named one of `alertnames`, as `Alert`
        values with status FIRING (namespace, pod, container and value read as the webhook reads them).
        Raises `core.errors.AlertSourceUnavailable(reason)` when it cannot say."""
        ...
