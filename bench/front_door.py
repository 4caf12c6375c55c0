"""The front door's candidates put through the same checks, each serving the same Flask echo (bench/echo.py).

Candidates: `worker` — the reactor's own gunicorn worker (reactor/app/worker.py: gthread that reads each request
whole in its event loop); `gthread` — stock gunicorn gthread with the same threads; `waitress` — waitress, which
reads each request whole in its asyncore loop before a thread sees it (4 threads, its default; connection_limit
raised to the reactor's 512 buffered connections, channel_timeout to `server.readTimeout`).

Checks, each against a fresh server:
- slow clients: `SLOW` clients trickle a POST (one byte every second); a normal 1-alert POST is sent meanwhile,
  `NORMAL` times: its latency (a stall is counted at the client's `STALL` s timeout);
- idle flood: `FLOOD` connections opened and left idle, then normal POSTs: answered, and how fast;
- smuggling: Content-Length and Transfer-Encoding together, with a second request hidden in the body: the
  statuses answered (two answers: the hidden request was served);
- header flood: 200 header fields: the status (431/400 expected, not 200);
- a chunked body cut off by EOF (the client closes its side): the status, or `closed` when nothing came back;
- throughput: the load generator's 1-alert and 1,000-alert runs, and the server's CPU per request.

`python -m bench.front_door [worker waitress gthread]`; prints one JSON object. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import procs
from bench.loadgen import write_bodies

SLOW, NORMAL, FLOOD, STALL = 64, 5, 700, 15.0  # FLOOD: past the worker's 512 and waitress's connection_limit
READ_TIMEOUT = 10
CANDIDATES = ("worker", "waitress", "gthread")


def alert(i: int = 0) -> dict[str, Any]:
    return {"status": "firing", "labels": {"alertname": "GPUIdle", "namespace": "ml", "pod": f"p-{i}",
                                           "container": "main", "gpu": str(i % 8)},
            "annotations": {"value": "0.05"}, "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus/graph", "fingerprint": f"{i:016x}"}


def body(alerts: int) -> bytes:
    doc = {"version": "4", "groupKey": "{}:{}", "status": "firing", "receiver": "reactor",
           "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://am",
           "alerts": [alert(i) for i in range(alerts)], "truncatedAlerts": 0}
    return json.dumps(doc).encode()


def request(payload: bytes) -> bytes:
    return (b"POST /alerts HTTP/1.1\r\nHost: reactor\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))


def exchange(port: int, raw: bytes, *, timeout: float = STALL, half_close: bool = False) -> tuple[bytes, float]:
    """Send `raw`, read until the first answer's head and body are in (or the server closes): the bytes, seconds."""
    started = time.monotonic()
    got = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(raw)
            if half_close:
                s.shutdown(socket.SHUT_WR)
            while chunk := s.recv(65536):
                got += chunk
                head, sep, rest = got.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), None)
                if sep and length is not None and len(rest) >= length and not half_close:
                    break
    except (TimeoutError, ConnectionError, OSError):
        pass
    return got, time.monotonic() - started


def status(answer: bytes) -> str:
    return answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"


def normal_latencies(port: int, n: int = NORMAL, raw: bytes | None = None) -> dict[str, Any]:
    """`n` normal requests one after the other (`raw`: the bytes of one; a 1-alert echo POST by default)."""
    seconds, codes = [], []
    for _ in range(n):
        answer, took = exchange(port, raw or request(body(1)))
        seconds.append(took)
        codes.append(status(answer))
        time.sleep(0.1)
    return {"ms_p50": round(statistics.median(seconds) * 1e3, 1), "ms_max": round(max(seconds) * 1e3, 1),
            "codes": sorted(set(codes))}


def slow_clients(port: int, normal: bytes | None = None) -> dict[str, Any]:
    """`SLOW` clients trickle a POST while `normal` (a 1-alert POST by default) is sent `NORMAL` times."""
    stop = threading.Event()
    socks: list[socket.socket] = []
    head = b"POST /alerts HTTP/1.1\r\nHost: reactor\r\nContent-Length: 1000\r\n\r\n"

    def trickle(s: socket.socket) -> None:
        while not stop.wait(1.0):
            try:
                s.send(b"x")
            except OSError:
                return

    for _ in range(SLOW):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(head)
            socks.append(s)
        except OSError:
            break
    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in socks]
    for t in threads:
        t.start()
    time.sleep(1.5)
    try:
        return {"clients": len(socks), **normal_latencies(port, raw=normal)}
    finally:
        stop.set()
        for s in socks:
            s.close()


def idle_flood(port: int) -> dict[str, Any]:
    socks = []
    try:
        for _ in range(FLOOD):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        time.sleep(0.5)
        return {"connections": len(socks), **normal_latencies(port, 4)}
    finally:
        for s in socks:
            s.close()


def smuggling(port: int) -> dict[str, Any]:
    hidden = b"GET /hidden HTTP/1.1\r\nHost: reactor\r\n\r\n"
    raw = (b"POST /alerts HTTP/1.1\r\nHost: reactor\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"0\r\n\r\n" + hidden)
    answer, _ = exchange(port, raw, timeout=5, half_close=True)
    return {"statuses": [status(b"HTTP/" + part) for part in answer.split(b"HTTP/")[1:]] or ["closed"]}


def header_flood(port: int) -> dict[str, Any]:
    fields = b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 40) for i in range(200))
    raw = b"POST /alerts HTTP/1.1\r\nHost: reactor\r\n" + fields + b"Content-Length: 2\r\n\r\n{}"
    answer, _ = exchange(port, raw, timeout=5)
    return {"status": status(answer)}


def chunked_eof(port: int) -> dict[str, Any]:
    payload = body(1)
    raw = (b"POST /alerts HTTP/1.1\r\nHost: reactor\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"%x\r\n%s" % (len(payload), payload[:40]))
    answer, took = exchange(port, raw, timeout=5, half_close=True)
    return {"status": status(answer), "ms": round(took * 1e3, 1)}


def throughput(child: procs.Child, tmp: Path, duration: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in (1, 1000):
        path = tmp / f"bodies-{size}"
        write_bodies(str(path), [body(size)])
        procs.load(child.port, path, threads=4, duration=0.5, max_requests=10_000)  # warm-up
        pids = procs.tree(child.pid)
        cpu = procs.cpu_seconds(pids)
        result = procs.load(child.port, path, threads=4, duration=duration, max_requests=100_000)
        cpu = procs.cpu_seconds(pids) - cpu
        out[str(size)] = {"rps": result["rps"], "p50_ms": result["p50_ms"], "codes": result["codes"],
                          "cpu_us_per_request": round(cpu / max(1, result["requests"]) * 1e6, 1)}
    out["marginal_us_per_alert"] = round((out["1000"]["cpu_us_per_request"] - out["1"]["cpu_us_per_request"]) / 999,
                                         2)
    return out


def start(candidate: str, tmp: Path) -> procs.Child:
    port = procs.free_port()
    env = {"REACTOR_SERVER__LISTEN": f"127.0.0.1:{port}", "REACTOR_SERVER__READ_TIMEOUT": f"{READ_TIMEOUT}s"}
    args = ["-m", "bench.echo"] if candidate == "worker" else ["-m", "bench.front_door", "--serve", candidate,
                                                               str(port)]
    return procs.start(args, port=port, log=tmp / f"{candidate}.log", env=env, ready_path="/readyz")


def serve(candidate: str, port: int) -> None:
    """Serve the echo under `waitress` or stock gunicorn `gthread` (the reactor's worker: bench/echo.py)."""
    from bench.echo import create_echo_app

    app = create_echo_app()
    app.config["MAX_CONTENT_LENGTH"] = 8 << 20
    if candidate == "waitress":
        import waitress

        waitress.serve(app, listen=f"127.0.0.1:{port}", threads=4, connection_limit=512,
                       channel_timeout=READ_TIMEOUT, max_request_body_size=8 << 20, _quiet=True)
        return
    from gunicorn.app.base import BaseApplication

    class Stock(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in {"bind": [f"127.0.0.1:{port}"], "workers": 1, "worker_class": "gthread",
                               "threads": 12, "keepalive": 5, "loglevel": "warning"}.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return app

    Stock().run()


def measure(candidates: Sequence[str] = CANDIDATES, duration: float = 1.5) -> dict[str, Any]:
    out: dict[str, Any] = {"load_average": os.getloadavg()}
    checks = {"slow_clients": slow_clients, "idle_flood": idle_flood, "smuggling": smuggling,
              "header_flood": header_flood, "chunked_eof": chunked_eof}
    with tempfile.TemporaryDirectory(prefix="gpu-reactor-door-") as folder:
        tmp = Path(folder)
        for candidate in candidates:
            found: dict[str, Any] = {}
            for name, check in checks.items():
                child = start(candidate, tmp)
                try:
                    found[name] = check(child.port)
                finally:
                    child.stop()
            child = start(candidate, tmp)
            try:
                found["throughput"] = throughput(child, tmp, duration)
                found["idle_rss_mb"] = procs.pod_rss_mb(child.pid)
                found["processes"] = len(procs.tree(child.pid))
            finally:
                child.stop()
            out[candidate] = found
    out["load_average_after"] = os.getloadavg()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.front_door")
    p.add_argument("candidates", nargs="*", default=list(CANDIDATES))
    p.add_argument("--serve", nargs=2, metavar=("CANDIDATE", "PORT"), help="serve the echo (a child process)")
    p.add_argument("--duration", type=float, default=1.5)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return 0
    print(json.dumps(measure(args.candidates, args.duration), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
