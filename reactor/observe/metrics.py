"""What the observers count: rollouts followed to an end, the verifier's backlog and Lease, and the GPU-hours the
reactor's standing changes hold back or add (and their cost)."""

from __future__ import annotations

from reactor.core.metrics import Metrics, MetricSet, StateGauge


class ObserveMetrics(MetricSet):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__(metrics)
        self.verifications = self.counter(
            "reactor_verifications", "Rollouts of the reactor's changes followed to an end, one per change, by "
            "result.", ["result"], zeroed=[("verified",), ("reverted",)])
        self.gpu_seconds_saved = self.counter(
            "reactor_gpu_seconds_saved", "GPU-seconds held back by the reactor's changes while they stand "
            "(reactor_gpus_released integrated over time).", ["namespace"])
        self.gpu_cost_saved = self.counter(
            "reactor_gpu_cost_saved", "Cost of the GPU-seconds saved, at finops.gpuHourlyCost of gpuResource, in "
            "that price's currency.", ["namespace"])
        self.gpu_hourly_cost = self.gauge(
            "reactor_gpu_hourly_cost", "The cost of one GPU-hour, per resource, as configured (finops.gpuHourlyCost).",
            ["resource"])
        self.verifications_pending = StateGauge(
            "reactor_verifications_pending", "Workloads whose change the verifier still follows (its backlog).")
        self.verifier_leader = StateGauge(
            "reactor_verifier_leader", "1 while this replica verifies (holds the verifier Lease, or runs without "
            "one), else 0.")
        self.gpus_released = StateGauge(
            "reactor_gpus_released", "GPUs (per pod × replicas) the reactor's standing changes hold back now: "
            "recorded original minus current.", ["namespace"])
        self.gpus_added = StateGauge(
            "reactor_gpus_added", "GPUs (per pod × replicas) the reactor's standing changes add now: current minus "
            "recorded original.", ["namespace"])
        self.states(self.verifications_pending, self.verifier_leader, self.gpus_released, self.gpus_added)
