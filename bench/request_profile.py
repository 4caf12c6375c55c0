"""Where a notification's CPU goes: the webhook's 1-alert and 1,000-alert paths profiled as the serving process runs
them — the reactor assembled from the bench policy, its watch cache synced, the WSGI application called with the
environ gunicorn builds (reads.py's guarded input included), after the bench's storm put every workload in cooldown.

`python -m bench.request_profile [--runs 20] [--top 25] [--no-freeze] [--rounds 15]`: prints the CPU µs per request
of each path (mean and median), the cycle collector's runs during them, and the functions that took it (cProfile,
sorted by own time; `SORT=cumulative` sorts by time including callees). `--rounds R` also times R rounds of the same
calls back to back — the reactor's whole call, its engine alone, and the bench's Flask echo (bench/echo.py) on the
same bodies — and prints the fastest round of each: on a shared machine the fastest round, the one least disturbed,
moves by 1–2 % from one process to the next where a median moves by several. The embedded cluster runs in this
process but is idle on the cooldown path (the cache answers every read). The service is frozen out of the
collector's reach once built, as the serving worker does (reactor/app/runner.py); `--no-freeze` leaves it there, to
see what that costs.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from bench.echo import create_echo_app
from bench.scenario import Fleet, build_cluster, now, policy_yaml, start_sim, storm_body, webhook_bodies
from reactor.app.assembly import assemble
from reactor.app.reads import guard_input
from reactor.cluster.kube import KubeGateway
from reactor.config.settings import build_settings
from reactor.core.metrics import Metrics
from reactor.core.outcome import answer_json
from reactor.intake.alerts import parse_envelope
from reactor.intake.wire import read_envelope
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


def stages(app: Any, service: Any, bodies: list[bytes], others: list[bytes], token: str) -> dict[str, float]:
    """The handling thread's CPU per request (the embedded cluster's threads are not counted): the whole WSGI call
    on `bodies` (mean and median), the cycle collector's runs during them (count and ms, by generation), and on
    `others` (new firings as well) the intake's reading as the webhook reads (intake/wire.py, else the careful
    reading), the engine's handling and the answer."""
    n = max(1, len(bodies))
    times: list[float] = []
    collected: dict[int, list[float]] = {}
    began = [0.0]

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            collected.setdefault(info["generation"], []).append(time.perf_counter() - began[0])

    gc.callbacks.append(collector)
    try:
        for b in bodies:
            started = time.thread_time()
            call(app, b, token)
            times.append(time.thread_time() - started)
    finally:
        gc.callbacks.remove(collector)
    found = {"whole call (mean)": sum(times) / n * 1e6, "whole call (median)": statistics.median(times or [0.0]) * 1e6}
    for generation, runs in sorted(collected.items()):
        found[f"gen{generation} collections"] = len(runs)
        found[f"gen{generation} ms"] = sum(runs) * 1e3
    parse = handle = encode = 0.0
    for b in others:
        t0 = time.thread_time()
        notification = (read_envelope(b) or parse_envelope(json.loads(b))).notification
        t1 = time.thread_time()
        outcomes = service.engine.handle(notification)
        t2 = time.thread_time()
        answer_json({}, outcomes)
        t3 = time.thread_time()
        parse, handle, encode = parse + t1 - t0, handle + t2 - t1, encode + t3 - t2
    m = max(1, len(others))
    return {**found, "parse": parse / m * 1e6, "engine.handle": handle / m * 1e6, "answer": encode / m * 1e6}


def fastest(app: Any, service: Any, echo: Any, bodies: list[bytes], token: str, rounds: int) -> dict[str, float]:
    """µs per call in the fastest of `rounds` rounds (wall time, the process otherwise idle): the reactor's whole WSGI
    call, its engine's `handle` alone on the same notifications already read, and the echo's whole call. Each round
    calls every body of `bodies` (new firings on workloads in cooldown) in turn, `per_round` calls in all."""
    notifications = [(read_envelope(b) or parse_envelope(json.loads(b))).notification for b in bodies]
    per_round = max(len(bodies), 2000 // max(1, len(notifications[0].alerts)))
    found: dict[str, float] = {}
    for name, one in (("whole call", lambda i: call(app, bodies[i % len(bodies)], token)),
                      ("engine.handle", lambda i: service.engine.handle(notifications[i % len(bodies)])),
                      ("echo's whole call", lambda i: call(echo, bodies[i % len(bodies)], token))):
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            for i in range(per_round):
                one(i)
            best = min(best, time.perf_counter() - started)
        found[name] = best / per_round * 1e6
    return found


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.request_profile")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--rounds", type=int, default=0, help="also print the fastest of this many rounds (see above)")
    p.add_argument("--no-freeze", action="store_true",
                   help="leave the assembled service to the cycle collector (the serving worker freezes it)")
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
            if not args.no_freeze:
                gc.freeze()  # as the serving worker does once it has built the service (reactor/app/runner.py)
            if service.informers is not None:
                service.informers.run_once()
            app = guard_input(service.app)
            storm_at = now() - timedelta(minutes=30)
            print("storm:", call(app, storm_body(fleet, storm_at), token), file=sys.stderr)
            service.events.run_once()
            relist = service.informers.run_once if service.informers is not None else (lambda: None)
            relist()  # the storm's writes, as the serving process's watches would have brought them
            for size in (1, 1000):
                bodies = webhook_bodies(fleet, size, args.runs, storm_at + timedelta(minutes=1 + size))
                call(app, bodies[0], token)  # warm
                relist()
                others = webhook_bodies(fleet, size, args.runs, storm_at + timedelta(minutes=2 + size))
                found = stages(app, service, bodies[1:], others, token)
                print(f"== {size} alert(s), CPU µs per request on the handling thread (no profiler): "
                      + ", ".join(f"{k} {v:.0f}" for k, v in found.items()))
                if args.rounds:
                    quickest = fastest(app, service, create_echo_app(), others, token, args.rounds)
                    print(f"== {size} alert(s), µs per call in the fastest of {args.rounds} rounds: "
                          + ", ".join(f"{k} {v:.1f}" for k, v in quickest.items()))
                bodies = webhook_bodies(fleet, size, args.runs, storm_at + timedelta(minutes=3 + size))
                call(app, bodies[0], token)
                relist()
                profiler = cProfile.Profile()
                started = time.process_time()
                profiler.enable()
                statuses = {call(app, b, token) for b in bodies[1:]}
                profiler.disable()
                cpu = (time.process_time() - started) / max(1, len(bodies) - 1)
                print(f"== {size} alert(s): {cpu * 1e6:.0f} µs CPU per request (profiled), {statuses}")
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(os.environ.get("SORT", "tottime")).print_stats(args.top)
                print(out.getvalue())
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
