"""After acting and beside it: the verifier, its Lease, the GPU-hours ledger and the probes."""
