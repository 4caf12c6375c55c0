"""The reactor's own state on a workload: the annotation codec, its seal (HMAC), the one owner of every state write
(writes.py), where a record lives (homes.py, lease_home.py) and what counts (the state ledger, ledger_codec.py).
docs/state.md says how they fit."""
