"""A small closed-loop HTTP load generator: a few threads, one keep-alive connection each.

Each thread sends the next body (round robin over the given bodies), reads the whole answer,
and records the status and the latency. Every run is bounded both in time and in requests.
Run it as a child process (`python -m bench.loadgen`) so that its CPU does not share a GIL
with the server or the embedded cluster; it prints one JSON object.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

MAX_REQUESTS = 1_000_000


def quantile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted values (0 when there are none)."""
    if not ordered:
        return 0.0
    return ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]


@dataclass
class LoadResult:
    """What one run measured; latencies in seconds, sorted."""

    requests: int
    errors: int
    seconds: float
    codes: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def quantile(self, q: float) -> float:
        return quantile(self.latencies, q)

    def summary(self) -> dict[str, object]:
        return {"requests": self.requests, "errors": self.errors, "seconds": round(self.seconds, 3),
                "rps": round(self.rps, 1), "p50_ms": round(self.quantile(0.5) * 1e3, 3),
                "p99_ms": round(self.quantile(0.99) * 1e3, 3), "codes": self.codes}


def run_load(host: str, port: int, path: str, bodies: Sequence[bytes], *, headers: dict[str, str] | None = None,
             threads: int = 4, duration: float = 3.0, max_requests: int = MAX_REQUESTS,
             timeout: float = 30.0) -> LoadResult:
    """POST `bodies` round robin from `threads` connections until `duration` or `max_requests`."""
    if not bodies:
        raise ValueError("no bodies to send")
    send_headers = {"Content-Type": "application/json", **(headers or {})}
    tickets = itertools.count()  # next() on a count is atomic under the GIL
    lock = threading.Lock()
    latencies: list[float] = []
    codes: Counter[str] = Counter()
    errors = [0]
    max_requests = min(max_requests, MAX_REQUESTS)
    deadline = time.monotonic() + duration

    def worker() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        mine: list[float] = []
        my_codes: Counter[str] = Counter()
        my_errors = 0
        try:
            while time.monotonic() < deadline:
                ticket = next(tickets)
                if ticket >= max_requests:
                    break
                body = bodies[ticket % len(bodies)]
                started = time.perf_counter()
                try:
                    conn.request("POST", path, body=body, headers=send_headers)
                    response = conn.getresponse()
                    response.read()
                except (OSError, http.client.HTTPException):
                    my_errors += 1
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=timeout)
                    continue
                mine.append(time.perf_counter() - started)
                my_codes[str(response.status)] += 1
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)
                codes.update(my_codes)
                errors[0] += my_errors

    started = time.perf_counter()
    pool = [threading.Thread(target=worker, name=f"loadgen-{i}", daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(duration + timeout + 5)
    seconds = time.perf_counter() - started
    latencies.sort()
    return LoadResult(len(latencies), errors[0], seconds, dict(codes), latencies)


def read_bodies(path: str) -> list[bytes]:
    """One body per line (compact JSON has no raw newlines)."""
    with open(path, "rb") as f:
        return [line.rstrip(b"\n") for line in f if line.strip()]


def write_bodies(path: str, bodies: Sequence[bytes]) -> None:
    with open(path, "wb") as f:
        for body in bodies:
            if b"\n" in body:
                raise ValueError("a body contains a newline: dump it as compact JSON")
            f.write(body + b"\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--path", default="/alerts")
    p.add_argument("--bodies", required=True, help="file with one request body per line")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--max-requests", type=int, default=MAX_REQUESTS)
    p.add_argument("--header", action="append", default=[], help="'Name: value'; may repeat")
    p.add_argument("--latencies", action="store_true", help="include every latency in the output")
    args = p.parse_args(argv)
    headers = dict(h.split(": ", 1) for h in args.header)
    result = run_load(args.host, args.port, args.path, read_bodies(args.bodies), headers=headers,
                      threads=args.threads, duration=args.duration, max_requests=args.max_requests)
    out = asdict(result) if args.latencies else result.summary()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
