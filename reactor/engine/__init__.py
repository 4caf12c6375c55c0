"""The engine: one notification in, one outcome per alert out (core.py), with its rebalancing steps
(rebalancing.py) and what one notification learns of a namespace (namespace.py)."""

from reactor.engine.core import Engine, utcnow

__all__ = ["Engine", "utcnow"]
