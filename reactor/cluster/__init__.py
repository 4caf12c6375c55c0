"""The cluster as the reactor reads it: the API gateway, the watch cache, and the conversions from raw objects
(workloads, compute resources, operators' resources, rollout progress) into the model's values, and the one
cluster view (view.py) the engine and the verifier both read workloads through."""
