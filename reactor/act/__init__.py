"""Carrying a decision out: the act protocol, patch bodies, in-place resize, the budget, the record step, and
Kubernetes Events (queued, sent off the request path, correlated: posting.py)."""
