"""The one backoff: a wait that doubles with each failure, from a first delay up to a cap.

Used wherever something that keeps failing is tried again — an API call answered 429/5xx, a watch that keeps
failing, a revert the verifier could not apply — so they all wait the same way (kopf's throttlers are the model:
a sequence of delays, reset on success by the caller).
"""

from __future__ import annotations

MAX_DOUBLINGS = 30  # 2**30 times the first delay is past any cap; stops the power from growing without bound


def doubling(failures: int, *, first: float, cap: float) -> float:
    """Seconds to wait after `failures` failures in a row (0 → `first`, 1 → 2 × `first`, …), never over `cap`."""
    return min(cap, first * 2 ** min(max(failures, 0), MAX_DOUBLINGS))
