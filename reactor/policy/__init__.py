"""The pure decision policy: alert signal + workload state + bounds + policy + now → Action | Skip.

Imports only `reactor.core.model` and `reactor.state.annotations`; never Flask, `kubernetes`,
`prometheus_client`, yaml or any file or network I/O, and never reads the clock (a test pins it).
"""

from __future__ import annotations

from reactor.policy.context import ComputeFacts
from reactor.policy.decision import decide, decide_given_back, decide_stalled, effective_mode
from reactor.policy.rails import alert_refusal, owner_refusal
from reactor.policy.signals import PRECEDENCE, fold

__all__ = ["ComputeFacts", "PRECEDENCE", "alert_refusal", "decide", "decide_given_back", "decide_stalled",
           "effective_mode", "fold", "owner_refusal"]
