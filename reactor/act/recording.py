"""The record step: one metric update and one structured log line per decision.

Kept apart from the engine so that what is counted and logged for a decision is decided in one
place; it changes nothing and reads nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from reactor.act.metrics import ActMetrics
from reactor.core.metrics import Metrics
from reactor.core.model import Action, Alert, Result, Signal, Skip, SkipReason, WorkloadRef
from reactor.core.outcome import Outcome, outcome_for

log = logging.getLogger(__name__)


class Recorder:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.counts = ActMetrics.of(metrics)  # what the record step counts (act/metrics.py)

    def skip(self, ref: WorkloadRef, signal: Signal, skip: Skip) -> None:
        """A workload decision that refused to act: counted once for the workload, however many alerts name it."""
        self.metrics.child(self.counts.workload_skips, skip.reason.value).inc()
        self._log(ref, signal, skip, Result.SKIPPED, skip.detail)

    def unfinished(self, ref: WorkloadRef, skip: Skip, result: Result, *, counted: SkipReason | None) -> None:
        """A workload whose decision never finished (the deadline passed, the API failed, a bug): counted under
        `counted` (None: not a refusal to count, e.g. a transient error the retry answers) and logged."""
        if counted is not None:
            self.metrics.child(self.counts.workload_skips, counted.value).inc()
        level = logging.INFO if result is Result.SKIPPED else logging.WARNING
        log.log(level, "decision", extra={"workload": str(ref), "result": result, "reason": skip.reason.value,
                                          "detail": skip.detail})

    def action(self, ref: WorkloadRef, signal: Signal, action: Action, result: Result, detail: str = "") -> None:
        """An action `applied`, `recommended` or `failed`; applied ones also count the GPUs they moved."""
        self.metrics.child(self.counts.actions, action.action, result, ref.namespace).inc()
        if result is Result.APPLIED and action.gpu_delta:
            direction = "added" if action.gpu_delta > 0 else "released"
            self.counts.gpus_changed.labels(direction=direction, namespace=ref.namespace).inc(abs(action.gpu_delta))
        self._log(ref, signal, action, result, detail)

    def alert_skip(self, alert: Alert, ref: WorkloadRef | None, skip: Skip) -> Outcome:
        """A refusal of one alert before it reached a workload decision (screening, resolving)."""
        # Failed, as when deciding a workload: the pod's alerts met a failure (the API's, or its own data's).
        result = Result.FAILED if skip.reason in (SkipReason.API_ERROR, SkipReason.INTERNAL_ERROR) else Result.SKIPPED
        self.metrics.child(self.counts.alerts_skipped, skip.reason.value).inc()
        log.info("decision", extra={"alert": alert.name, "fingerprint": alert.fingerprint, "namespace": alert.namespace,
                                    "pod": alert.pod, "workload": str(ref) if ref else None, "result": result,
                                    "reason": skip.reason.value, "detail": skip.detail})
        return outcome_for(alert, ref, skip, result)

    def _log(self, ref: WorkloadRef, signal: Signal, decision: Action | Skip, result: Result, detail: str) -> None:
        fields: dict[str, Any] = {
            "workload": str(ref),
            "alert": signal.alert,
            "status": signal.status,
            "fingerprint": signal.fingerprint,
            "pods": len(signal.pods),
            "result": result,
            "detail": detail,
        }
        if isinstance(decision, Action):
            fields.update(
                action=decision.action,
                direction=decision.direction,
                container=decision.container,
                **{"from": decision.from_value, "to": decision.to_value},
            )
        else:
            fields["reason"] = decision.reason.value
        log.info("decision", extra=fields)
