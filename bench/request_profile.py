"""Where a notification's CPU goes: the webhook's 1-alert and 1,000-alert paths profiled as the serving process runs
them — the reactor assembled from the bench policy, its watch cache synced, the WSGI application called with the
environ gunicorn builds (reads.py's guarded input included), after the bench's storm put every workload in cooldown.

`python -m bench.request_profile [--size 1000] [--runs 20]`: prints the CPU µs per request of each path and the
functions that took it (cProfile, sorted by own time). The embedded cluster runs in this process but is idle on
the cooldown path (the cache answers every read).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import secrets
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from bench.scenario import Fleet, build_cluster, now, policy_yaml, start_sim, storm_body, webhook_bodies
from reactor.app.assembly import assemble
from reactor.app.reads import guard_input
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.tools.launcher import state_key_file


def environ(body: bytes, token: str) -> dict[str, Any]:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": "/alerts", "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "reactor", "SERVER_PORT": "8080", "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
            "HTTP_AUTHORIZATION": f"Bearer {token}", "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
            "wsgi.run_once": False, "wsgi.version": (1, 0)}


def call(app: Any, body: bytes, token: str) -> str:
    status: list[str] = []
    answer = app(environ(body, token), lambda s, h, *a: status.append(s))
    b"".join(answer)
    return status[0]


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.request_profile")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    sim = start_sim()
    try:
        build_cluster(sim)
        fleet = Fleet.read(sim)
        with tempfile.TemporaryDirectory() as folder:
            tmp, token = Path(folder), secrets.token_hex(16)
            (tmp / "token").write_text(token)
            doc = yaml.safe_load(policy_yaml())
            doc["server"] = {**doc.get("server", {}), "tokenFile": str(tmp / "token")}
            doc["state"] = {**doc.get("state", {}), "keyFile": str(state_key_file(tmp))}
            settings = build_settings(doc, {})
            metrics = Metrics()
            service = assemble(settings, kube=KubeGateway.for_url(sim.url, settings.kube, metrics), metrics=metrics)
            if service.informers is not None:
                service.informers.run_once()
            app = guard_input(service.app)
            storm_at = now() - timedelta(minutes=30)
            print("storm:", call(app, storm_body(fleet, storm_at), token), file=sys.stderr)
            service.engine.events.run_once()
            for size in (1, 1000):
                bodies = webhook_bodies(fleet, size, args.runs, storm_at + timedelta(minutes=1 + size))
                call(app, bodies[0], token)  # warm
                profiler = cProfile.Profile()
                started = time.process_time()
                profiler.enable()
                statuses = {call(app, b, token) for b in bodies[1:]}
                profiler.disable()
                cpu = (time.process_time() - started) / max(1, len(bodies) - 1)
                print(f"== {size} alert(s): {cpu * 1e6:.0f} µs CPU per request (profiled), {statuses}")
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
                print(out.getvalue())
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
