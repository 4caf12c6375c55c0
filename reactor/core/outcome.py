"""The per-alert outcome returned in the webhook answer and printed by `demo` and `plan`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

import msgspec

from reactor.core.memo import Memo
from reactor.core.model import Action, Alert, Result, Skip, WorkloadRef, iso


class Outcome(msgspec.Struct, frozen=True, gc=False):
    """One alert's answer. A frozen msgspec Struct, as `Alert` is and for the same reason: one is built per alert of
    every notification, and a frozen dataclass sets its fifteen fields one `object.__setattr__` at a time."""

    alert: str
    fingerprint: str
    starts_at: str
    status: str
    namespace: str | None
    pod: str | None
    workload: str | None
    result: Result
    action: str | None = None
    container: str | None = None
    from_value: int | str | None = None
    to_value: int | str | None = None
    reason: str | None = None
    detail: str = ""
    considered: tuple[tuple[str, str | None], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "alert": self.alert, "fingerprint": self.fingerprint, "startsAt": self.starts_at,
            "status": self.status, "namespace": self.namespace, "pod": self.pod,
            "workload": self.workload, "result": self.result,
        }
        if self.action is not None:
            out.update(action=self.action, container=self.container, **{"from": self.from_value, "to": self.to_value})
        if self.reason is not None:
            out["reason"] = self.reason
        if self.detail:
            out["detail"] = self.detail
        if self.considered:
            out["considered"] = [{"strategy": s, "reason": r} for s, r in self.considered]
        return out

    @property
    def summary(self) -> str:
        """`4 → 3` for an action, the reason for a skip: the demo table's last column."""
        if self.action is not None:
            target = f"{self.container}: " if self.container else ""
            return f"{self.action} {target}{self.from_value} → {self.to_value}"
        return f"skip: {self.reason}" + (f" ({self.detail})" if self.detail else "")


def outcome_for(alert: Alert, ref: WorkloadRef | None, decision: Action | Skip, result: Result) -> Outcome:
    return alert_outcome(alert, decision_fields(ref, decision, result))


def decision_fields(ref: WorkloadRef | None, decision: Action | Skip, result: Result) -> dict[str, Any]:
    """What the outcomes of every alert folded into one decision share: computed once per workload, not per alert."""
    fields: dict[str, Any] = dict(workload=str(ref) if ref else None, result=result, considered=tuple(
        (c.strategy, c.reason.value if c.reason else None) for c in decision.considered))
    if isinstance(decision, Action):
        fields.update(action=decision.action, container=decision.container, from_value=decision.from_value,
                      to_value=decision.to_value)
        if decision.note or decision.effect:
            fields["detail"] = "; ".join(t for t in (decision.effect, decision.note) if t)
    else:
        fields.update(reason=decision.reason.value, detail=decision.detail)
    return fields


def alert_outcome(alert: Alert, fields: dict[str, Any]) -> Outcome:
    """One alert's outcome, with the decision's `fields` (see `decision_fields`)."""
    return Outcome(alert.name, alert.fingerprint, iso(alert.starts_at), alert.status, alert.namespace, alert.pod,
                   **fields)


_HEAD = ("alert", "fingerprint", "startsAt", "status", "namespace", "pod")
TAILS_KEPT = 4096
# The encoded decision part of an outcome, by everything it is made of (see `answer_json`); two threads encoding the
# same decision at once store the same text.
_TAILS: Memo[tuple[Any, ...], str] = Memo(TAILS_KEPT)
# `json.dumps(..., separators=...)` builds a new encoder on every call (only the all-defaults call reuses one): on
# the 1-alert answer that was most of the answer's cost. One encoder, kept (encoding holds no state between calls).
_compact = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


def _text(value: str | None) -> str:
    return "null" if value is None else str(encode_basestring_ascii(value))


def answer_json(summary: dict[str, int], outcomes: Sequence[Outcome]) -> str:
    """The webhook's 200 answer, exactly as `jsonify({"status", "summary", "outcomes"})` writes it (compact, ASCII,
    keys in order, a final newline), built without a dict per outcome.

    Each outcome is its alert's six fields and its decision's: the decision's part is encoded once per decision
    (an answer to 10,000 alerts names 50 workloads), the alert's with the C string encoder; no intermediate
    structure the size of the answer is built beside the answer itself. The decision's part is also remembered
    across answers (`_TAILS`): a workload in cooldown is answered the same way by every notification until it ends.
    """
    parts = []
    for o in outcomes:
        key = (o.workload, o.result, o.action, o.container, type(o.from_value), o.from_value, type(o.to_value),
               o.to_value, o.reason, o.detail, o.considered)
        tail = _TAILS.get(key)
        if tail is None:
            rest = {k: v for k, v in o.to_json().items() if k not in _HEAD}
            tail = _TAILS.keep(key, _compact(rest)[1:])
        parts.append(f'{{"alert":{_text(o.alert)},"fingerprint":{_text(o.fingerprint)},'
                     f'"startsAt":{_text(o.starts_at)},"status":{_text(o.status)},"namespace":{_text(o.namespace)},'
                     f'"pod":{_text(o.pod)},{tail}')
    counts = _compact(summary)
    return f'{{"status":"ok","summary":{counts},"outcomes":[{",".join(parts)}]}}\n'
