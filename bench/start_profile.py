"""Where the start at scale goes: the watch cache's first lists at 100,000 objects, profiled in a process of its own.

`python -m bench.start_profile [100k|4k]`: the embedded cluster (this process) holds the objects bench/cache_scale.py
builds; a child process builds the gateway and the informers as `reactor serve` does and lists every kind once,
under cProfile when `--profile` is given. It prints the seconds to synced, the CPU seconds each side spent (the
reactor's child; the API server's serialization, which runs here, in this process) and, profiled, the functions
that took the reactor's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import cache_scale, procs
from reactor_sim import SimCluster

CHILD = """
import cProfile, io, json, logging, pstats, sys, threading, time
from reactor.app.logs import configure
configure("text", "WARNING")
from reactor.cluster.informer import Informers
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics

url, namespaces, profile = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
settings = build_settings({"kube": {"qps": 5000, "burst": 5000}}, {})
kube = KubeGateway.for_url(url, settings.kube, Metrics())
from reactor.app.arenas import release_free_memory
informers = Informers(kube, namespaces, after_list=release_free_memory)  # as reactor/app/assembly.py builds them
profiler = cProfile.Profile() if profile else None
started = time.monotonic()
if profiler:  # every list on this thread, one after the other: cProfile sees this thread only
    profiler.enable()
    informers.run_once()
    profiler.disable()
else:
    informers.start()
    while informers.unsynced():
        time.sleep(0.05)
took = time.monotonic() - started
informers.stop()
print(json.dumps({"synced_s": round(took, 2), "objects": informers.store.count(),
                  "reactor_cpu_s": round(time.process_time(), 2)}))
if profiler:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
    print(out.getvalue(), file=sys.stderr)
"""


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.start_profile")
    p.add_argument("size", nargs="?", default="100k", choices=sorted(cache_scale.SIZES))
    p.add_argument("--profile", action="store_true", help="cProfile the child's main thread")
    args = p.parse_args()
    deployments, per, namespaces = cache_scale.SIZES[args.size]
    with SimCluster().start() as sim, tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        built = cache_scale.populate(sim, deployments, per, namespaces, f"cache-{args.size}")
        print(f"built {built['objects']:,} objects in {time.monotonic() - started:.1f} s", file=sys.stderr)
        log = Path(tmp) / "child.log"
        server_cpu = time.process_time()
        with log.open("w") as err:
            done = subprocess.run([sys.executable, "-c", CHILD, sim.url, json.dumps(built["namespaces"]),
                                   "1" if args.profile else "0"], cwd=procs.ROOT, stdout=subprocess.PIPE,
                                  stderr=err, text=True, timeout=900, check=False,
                                  env={"PYTHONPATH": str(procs.ROOT)})
        server_cpu = time.process_time() - server_cpu
        print(log.read_text()[-6000:], file=sys.stderr)
        found = json.loads(done.stdout.splitlines()[0]) if done.stdout else {}
        print(json.dumps({**found, "api_server_cpu_s": round(server_cpu, 2), "load_average": os.getloadavg()}))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
