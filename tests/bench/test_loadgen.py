"""The load generator counts what it sends, against a counting server, the raw server and the echo app."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench import procs
from bench.loadgen import LoadResult, read_bodies, run_load, write_bodies
from bench.rawserver import _content_length


class _Counting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[bytes] = []
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock:
            self.seen.append(body)
        code = 503 if body == b'{"fail":true}' else 200
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def counting() -> Iterator[tuple[int, list[bytes]]]:
    _Counting.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], _Counting.seen
    finally:
        server.shutdown()
        server.server_close()


def test_every_request_sent_is_counted_once_with_its_status(counting: tuple[int, list[bytes]]) -> None:
    port, seen = counting
    bodies = [b'{"n":1}', b'{"n":2}', b'{"fail":true}']
    result = run_load("127.0.0.1", port, "/alerts", bodies, threads=3, duration=30, max_requests=31)
    assert result.requests == len(seen) == 31
    assert result.errors == 0
    assert result.codes == {"200": 21, "503": 10}  # round robin: tickets 2, 5, … 29 are the failing body
    assert sorted(seen) == sorted(bodies[i % 3] for i in range(31))
    assert len(result.latencies) == 31 and result.latencies == sorted(result.latencies)


def test_a_run_stops_at_its_duration() -> None:
    port = procs.free_port()  # nothing listens: every attempt is an error, and the clock still ends the run
    result = run_load("127.0.0.1", port, "/", [b"{}"], threads=2, duration=0.3, timeout=1)
    assert result.requests == 0 and result.errors > 0
    assert result.seconds < 10


def test_quantiles_are_nearest_rank() -> None:
    result = LoadResult(100, 0, 1.0, {}, [i / 1000 for i in range(1, 101)])
    assert (result.quantile(0.5), result.quantile(0.99), result.rps) == (0.05, 0.099, 100.0)
    assert LoadResult(0, 0, 0.0).summary()["p99_ms"] == 0.0


def test_bodies_round_trip_through_the_file_and_refuse_newlines(tmp_path: Path) -> None:
    write_bodies(str(tmp_path / "b"), [b'{"a":1}', b"[2]"])
    assert read_bodies(str(tmp_path / "b")) == [b'{"a":1}', b"[2]"]
    with pytest.raises(ValueError):
        write_bodies(str(tmp_path / "c"), [b'{\n}'])


def test_raw_server_framing_reads_content_length_case_insensitively() -> None:
    assert _content_length(b"POST / HTTP/1.1\r\nHost: x\r\ncontent-LENGTH: 42") == 42
    assert _content_length(b"GET / HTTP/1.1\r\nHost: x") == 0


def test_the_generator_child_against_the_raw_server_and_the_echo_app(tmp_path: Path) -> None:
    """The same child-process generator the bench uses: exact counts, and the echo answers the body back."""
    body = json.dumps({"alerts": [{"labels": {"pod": f"p-{i}"}} for i in range(50)]}, separators=(",", ":")).encode()
    write_bodies(str(tmp_path / "bodies"), [body])
    (tmp_path / "policy.yaml").write_text("server: {threads: 4}\n")
    children = []
    try:
        port = procs.free_port()
        children.append(procs.start(["-m", "bench.rawserver", str(port)], port=port, log=tmp_path / "raw.log",
                                    ready_path=None))
        raw = procs.load(port, tmp_path / "bodies", threads=2, duration=30, max_requests=40)
        port = procs.free_port()
        children.append(procs.start(["-m", "bench.echo", "--config", str(tmp_path / "policy.yaml")], port=port,
                                    log=tmp_path / "echo.log", env={"REACTOR_SERVER__LISTEN": f"127.0.0.1:{port}"}))
        echo = procs.load(port, tmp_path / "bodies", threads=2, duration=30, max_requests=25)
        assert procs.cpu_seconds(procs.tree(children[-1].pid)) > 0
        assert procs.context_switches(procs.tree(children[-1].pid)) > 0  # its threads blocked at least once
        assert procs.rss_mb(procs.worker_of(children[-1].pid)) > 10
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/alerts", body=body, headers={"Content-Type": "application/json"})
        echoed = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        for child in children:
            child.stop()
    assert (raw["requests"], raw["errors"], raw["codes"]) == (40, 0, {"200": 40})
    assert (echo["requests"], echo["errors"], echo["codes"]) == (25, 0, {"200": 25})
    assert echoed == json.loads(body)
    assert all(child.popen.poll() is not None for child in children)
