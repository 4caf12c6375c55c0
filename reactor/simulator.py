"""`reactor sim`: the embedded Kubernetes API server on its own, seeded from ordinary manifests.

It prints the kubeconfig path so that kubectl and `reactor serve` can be pointed at it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from .sim import SimCluster


def run_sim(*, seeds: list[str], port: int, kubeconfig: str) -> int:
    sim = SimCluster().start(host="127.0.0.1", port=port)
    try:
        for seed in seeds:
            loaded = sim.load_manifests(Path(seed))
            print(f"loaded {len(loaded)} objects from {seed}")
        sim.settle()
        path = sim.write_kubeconfig(kubeconfig)
        print(f"embedded cluster at {sim.url}")
        print(f"kubeconfig: {Path(path).resolve()}   (kubectl --kubeconfig {path} get deploy -A)")
        sim.run_controllers()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        sim.stop()
    return 0
