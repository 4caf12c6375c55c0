"""The reactor's own state on a workload: the annotation codec, its seal (HMAC), and the one owner of every
state write (writes.py)."""
