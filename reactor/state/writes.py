"""The one owner of every write of the reactor's state: what a change records, the verified mark and the
record of a stalled change's revert. Each answer is the set of `gpu-reactor.io/*` annotations a patch
leaves (None deletes a key), sealed under the current key: nobody else builds or seals state annotations,
so the signed set (seal.SIGNED) and the codec (annotations.py) are known here only.

Pure: no I/O and no clock (the time is an argument). The act step and the verifier send what it answers, in
the same conditional patch as the change they record (or alone, for a verified mark), and nothing else.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final, Literal

from reactor.core.model import Action, Rebalance, Signal, Verification, Workload
from reactor.state.annotations import (
    REBALANCE,
    REVERTED,
    VERIFICATION,
    VERIFIED,
    holds_paid_growth,
    rebalance_annotation,
    state_annotations,
    verification_annotation,
)
from reactor.state.seal import SIGNED, StateKeys

Annotations = dict[str, str | None]
KEEP: Final = "keep"  # a write that leaves the workload's `rebalance` record as it is
RebalanceWrite = Rebalance | None | Literal["keep"]


class StateWrites:
    """Builds the sealed state for each kind of write. Without keys (dry run, `reactor plan`) nothing is ever
    written, and asking is an error."""

    def __init__(self, keys: StateKeys | None, cooldown: timedelta) -> None:
        self.keys, self.cooldown = keys, cooldown

    def change(self, action: Action, signal: Signal, workload: Workload, now: datetime, *,
               write: str | None = None, rebalance: RebalanceWrite = KEEP) -> Annotations:
        """What the act step writes with a change (or a revert an alert's resolve asked for): the last action,
        the cooldown, the originals, a pending verification (none for a revert), and the `rebalance` record:
        `rebalance` sets it (None deletes it); KEEP leaves the authenticated record read (every signed value is
        sealed together, so a record left out would no longer verify)."""
        annotations = state_annotations(action, signal, workload, self.cooldown, now)
        annotations[REBALANCE] = _kept_rebalance(workload) if rebalance == KEEP else (
            None if rebalance is None else rebalance_annotation(rebalance))
        return self._sealed(workload, annotations, write)

    def stalled_revert(self, action: Action, signal: Signal, workload: Workload, now: datetime,
                       verification: Verification, reason: str, *, write: str | None = None) -> Annotations:
        """What the verifier's revert of a stalled change writes: a revert's record, and `reverted` with why."""
        annotations = state_annotations(action, signal, workload, self.cooldown, now)
        annotations[VERIFICATION] = verification_annotation(REVERTED, verification.strategy, now, reason,
                                                            part=verification.part)
        # The growth a donor paid for, undone because its rollout stalled: the receiver holds nothing of the donor's
        # any more, so its record goes with it (the donor is then restored, engine/givebacks.py), as with a resolve.
        annotations[REBALANCE] = None if holds_paid_growth(workload.state) else _kept_rebalance(workload)
        return self._sealed(workload, annotations, write)

    def verified(self, workload: Workload, verification: Verification, now: datetime, *,
                 write: str | None = None) -> Annotations:
        """The verified mark: the verification becomes `verified`; every other signed value stays as read (the
        workload's state authenticated, so what is kept is what the reactor wrote)."""
        kept: Annotations = {k: workload.annotations.get(k) for k in SIGNED if k != VERIFICATION}
        kept[VERIFICATION] = verification_annotation(VERIFIED, verification.strategy, now, part=verification.part)
        return self._sealed(workload, kept, write)

    def _sealed(self, workload: Workload, annotations: Annotations, write: str | None) -> Annotations:
        if self.keys is None:
            raise ValueError("no state keys: a reactor without them (dry run) writes no state")
        return self.keys.sealed(workload.uid, annotations, write)


def _kept_rebalance(workload: Workload) -> str | None:
    """The workload's `rebalance` value as read, when it verified (state/seal.authenticate keeps it then)."""
    return workload.annotations.get(REBALANCE) if workload.state.rebalance is not None else None
