"""Operators' resources (adapters: which object to change, which field, how it rolls) and Kueue."""
