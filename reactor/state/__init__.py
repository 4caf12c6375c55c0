"""The reactor's own state on a workload: the annotation codec and its seal (HMAC)."""
