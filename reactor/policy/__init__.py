"""The pure decision policy: alert signal + workload state + bounds + policy + now → Action | Skip.

Imports only `reactor.model`, `reactor.settings` and `reactor.annotations`; never Flask,
`kubernetes` or `prometheus_client`, and never reads the clock.
"""

from __future__ import annotations

from .decision import decide, early_refusal, effective_mode
from .signals import PRECEDENCE, fold

__all__ = ["PRECEDENCE", "decide", "early_refusal", "effective_mode", "fold"]
