"""Rebalancing opportunities: a workload refused for a full GPU quota while another of its namespace had a donor
alert firing. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from reactor.policy.values import Policy
from reactor.tools.report.model import Decision, Trade, WorkloadKey
from reactor.tools.report.replay import Subject


def trades(subjects: Sequence[Subject], decisions: Mapping[WorkloadKey, Sequence[Decision]], policy: Policy,
            until: float) -> list[Trade]:
    """Receivers refused for a full GPU quota while another workload of the namespace had a donor alert firing."""
    found = []
    for receiver in subjects:
        for d in decisions[receiver.key]:
            if d.shortfall is None or d.alert not in policy.rebalance_receiver_alerts:
                continue
            start = d.at.timestamp()
            end = min((e.resolved_at.timestamp() for e in (f.episode for f in receiver.fired)
                       if e.alert == d.alert and e.fired_at.timestamp() <= start and e.resolved_at is not None
                       and e.resolved_at.timestamp() > start), default=until)
            for donor in subjects:
                if donor.key == receiver.key:
                    continue
                for f in donor.fired:
                    e = f.episode
                    if e.alert not in policy.rebalance_donor_alerts:
                        continue
                    lo = max(start, e.fired_at.timestamp())
                    hi = min(end, e.resolved_at.timestamp() if e.resolved_at is not None else until)
                    if hi > lo:
                        found.append(Trade(receiver.key.namespace, d.shortfall.quota, receiver.key, donor.key,
                                           _time(lo), _time(hi), (hi - lo) / 3600, d.shortfall.gpus))
    return _merged(found)


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _merged(trades: list[Trade]) -> list[Trade]:
    """Overlapping spans of one (receiver, donor) pair joined: a refusal repeated while it fires counts once."""
    joined: list[Trade] = []
    for t in sorted(trades, key=lambda t: (t.receiver, t.donor, t.start)):
        last = joined[-1] if joined else None
        if last is not None and (last.receiver, last.donor) == (t.receiver, t.donor) and t.start <= last.end:
            end = max(last.end, t.end)
            joined[-1] = Trade(last.namespace, last.quota, last.receiver, last.donor, last.start, end,
                               (end - last.start).total_seconds() / 3600, last.gpus_short)
        else:
            joined.append(t)
    return joined
