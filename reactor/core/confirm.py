"""What the engine asks before any write: does Prometheus's own rule state fire this alert now, and what does the
rule's expression measure for it (reactor/sources/confirm.py asks Prometheus's API).

An alert delivered by Alertmanager is a claim: anyone who reaches Alertmanager's API can post one, and it is then
delivered with Alertmanager's valid credentials. Prometheus's rule evaluation is the measurement. A structural
Protocol, so the engine depends on the question, never on one client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import msgspec

from reactor.core.model import Alert


@dataclass(frozen=True, slots=True)
class Confirmation:
    """Prometheus's word on one alert. `firing`: its rules fire the alert now for the same namespace, pod and
    container (an alert pending there that fires within one evaluation interval counts: the other replica of an HA
    pair evaluates a few seconds later). The measured fields are Prometheus's: `value` the rule expression's value
    (None: NaN, nothing measured), the others read from the annotations Prometheus rendered for its own alert.
    `reason` says what was found, for the answer and the log."""

    firing: bool
    reason: str
    value: float | None = None
    gpus: int | None = None
    idle_gpus: int | None = None
    cpu_throttling: float | None = None
    cpu_unknown: bool = False

    def measured(self, alert: Alert) -> Alert:
        """`alert` sized by Prometheus's measurement; its annotations (the claim, `value` included) stay as they
        came, for the people reading the answer and the logs."""
        if (alert.value, alert.gpus, alert.idle_gpus, alert.cpu_throttling, alert.cpu_unknown) == (
                self.value, self.gpus, self.idle_gpus, self.cpu_throttling, self.cpu_unknown):
            return alert  # the claim is the measurement: nothing to replace
        return msgspec.structs.replace(alert, value=self.value, gpus=self.gpus, idle_gpus=self.idle_gpus,
                                       cpu_throttling=self.cpu_throttling, cpu_unknown=self.cpu_unknown)


class Confirmer(Protocol):
    def confirm(self, alerts: Sequence[Alert], now: datetime) -> Sequence[Confirmation]:
        """One `Confirmation` per alert, in order, from at most one request per namespace (alerts of several
        namespaces may share one). Raises `core.errors.PrometheusUnavailable(reason)` when Prometheus cannot say:
        the caller then writes nothing."""
        ...
