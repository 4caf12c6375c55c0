"""The pure decision policy: alert signal + workload state + bounds + policy + now → Action | Skip.

Imports only `reactor.model` and `reactor.annotations`; never Flask, `kubernetes`,
`prometheus_client`, yaml or any file or network I/O, and never reads the clock (a test pins it).
"""

from __future__ import annotations

from .context import CpuFacts
from .decision import decide, effective_mode
from .rails import alert_refusal, owner_refusal
from .signals import PRECEDENCE, fold

__all__ = ["CpuFacts", "PRECEDENCE", "alert_refusal", "decide", "effective_mode", "fold", "owner_refusal"]
