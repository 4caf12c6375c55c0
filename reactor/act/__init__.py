"""Carrying a decision out: the act protocol, patch bodies, in-place resize, the budget, and Events."""
