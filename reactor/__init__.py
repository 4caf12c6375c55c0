"""GPU Reactor: turns Prometheus GPU-utilization alerts into safe changes to Kubernetes workloads."""

__version__ = "0.1.0"
