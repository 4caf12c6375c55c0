"""The probe listener (reactor/app/probe_server.py) in this process, over real sockets: what it answers,
and that clients which never finish a request cannot starve it."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from reactor.app import probe_server
from reactor.app.assembly import declare_metrics
from reactor.app.listeners import bind_listener
from reactor.app.probe_server import ProbeServer
from reactor.config.settings import build_settings
from reactor.core.errors import ConfigError, TemporaryError
from reactor.core.metrics import Metrics
from reactor.observe.probes import Probes, Readiness
from tests.support import Reactor


@pytest.fixture
def probes_up() -> Iterator[ProbeServer]:
    metrics = Metrics(CollectorRegistry())
    declare_metrics(metrics)  # every stage's metrics, as the assembly declares them at start
    server = ProbeServer(bind_listener("127.0.0.1:0"), Probes(metrics)).start()
    try:
        yield server
    finally:
        server.stop()


def exchange(port: int, raw: bytes, timeout: float = 5.0) -> bytes:
    """Send `raw`, read until the server closes; the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    answer = exchange(port, f"{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def test_it_answers_the_three_probe_paths(probes_up: ProbeServer) -> None:
    assert get(probes_up.port, "/healthz") == (200, b'{"status":"ok"}\n')
    assert get(probes_up.port, "/readyz") == (200, b'{"status":"ready"}\n')
    status, body = get(probes_up.port, "/metrics")
    assert status == 200 and b'reactor_workload_skips_total{reason="cooldown"} 0.0' in body
    assert get(probes_up.port, "/healthz?verbose=1")[0] == 200


@pytest.mark.parametrize("method,path,status", [
    ("GET", "/alerts", 404), ("GET", "/", 404), ("POST", "/healthz", 405), ("DELETE", "/metrics", 405),
], ids=["webhook-path", "root", "post", "delete"])
def test_anything_else_is_refused(probes_up: ProbeServer, method: str, path: str, status: int) -> None:
    assert get(probes_up.port, path, method)[0] == status


def test_head_gets_the_head_only(probes_up: ProbeServer) -> None:
    answer = exchange(probes_up.port, b"HEAD /healthz HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\n")
    assert b"Content-Length: 16\r\n" in answer


@pytest.mark.parametrize("raw", [b"garbage\r\n\r\n", b"GET /healthz\r\n\r\n", b"GET /healthz SPDY/3\r\n\r\n"],
                         ids=["no-spaces", "no-version", "not-http"])
def test_a_malformed_request_line_is_a_400(probes_up: ProbeServer, raw: bytes) -> None:
    assert exchange(probes_up.port, raw).startswith(b"HTTP/1.1 400 Bad Request\r\n")


def test_an_oversized_head_is_dropped_unanswered(probes_up: ProbeServer) -> None:
    raw = b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * (probe_server.HEAD_LIMIT * 2) + b"\r\n\r\n"
    try:
        answer = exchange(probes_up.port, raw)
    except ConnectionResetError:
        answer = b""
    assert answer == b""


def test_a_client_that_never_finishes_its_head_is_dropped_after_the_head_deadline(probes_up: ProbeServer) -> None:
    with socket.create_connection(("127.0.0.1", probes_up.port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()
        try:
            rest = s.recv(100)
        except ConnectionResetError:
            rest = b""
        waited = time.monotonic() - started
    assert rest == b""
    assert probe_server.HEAD_SECONDS - 0.5 < waited < probe_server.HEAD_SECONDS + 3


def test_healthz_stays_quick_while_many_clients_trickle(probes_up: ProbeServer) -> None:
    """The attack of issue 12 on the probe port itself: 100 sockets each holding a half-sent head.
    An asyncio loop spends no thread on them, so /healthz answers at once."""
    stalled = []
    try:
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", probes_up.port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x")
            stalled.append(s)
        times = []
        for _ in range(20):
            started = time.perf_counter()
            assert get(probes_up.port, "/healthz")[0] == 200
            times.append(time.perf_counter() - started)
        assert max(times) < 1.0, times
    finally:
        for s in stalled:
            s.close()


def _closed(s: socket.socket, wait: float = 2.0) -> bool:
    """Whether the server closed `s` (an evicted or dropped connection reads as EOF or a reset)."""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_full_listener_evicts_its_oldest_idle_connection_for_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23, item 8: at the cap a new connection is let in and the oldest idle one (no whole head) goes."""
    monkeypatch.setattr(probe_server, "MAX_CONNECTIONS", 5)
    metrics = Metrics(CollectorRegistry())
    declare_metrics(metrics)  # every stage's metrics, as the assembly declares them at start
    server = ProbeServer(bind_listener("127.0.0.1:0"), Probes(metrics)).start()
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(5)]
    try:
        for s in held:
            s.sendall(b"G")
        time.sleep(0.3)
        assert get(server.port, "/healthz")[0] == 200  # the sixth: answered
        assert _closed(held[0]) and not _closed(held[1], 0.3)
        assert server.connections.evicted == 1
    finally:
        for s in held:
            s.close()
        server.stop()


def test_400_idle_sockets_never_fail_healthz(probes_up: ProbeServer) -> None:
    """Issue 23, item 8: 400 idle sockets (the cap is 256) used to make /healthz fail 4 of 4."""
    flood = []
    try:
        for _ in range(400):
            flood.append(socket.create_connection(("127.0.0.1", probes_up.port), timeout=5))
        time.sleep(0.3)
        assert [get(probes_up.port, "/healthz")[0] for _ in range(4)] == [200] * 4
        assert probes_up.connections.open <= probe_server.MAX_CONNECTIONS
    finally:
        for s in flood:
            s.close()


def _closed_ones(socks: list[socket.socket], wait: float = 0.3) -> list[int]:
    """Indexes of the sockets the server closed, all looked at once (the head deadline keeps running)."""
    readable, _, _ = select.select(socks, [], [], wait)
    return sorted(i for i, s in enumerate(socks) if s in readable and _closed(s, 0.01))


def _from(source: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def test_one_source_holds_at_most_its_share(probes_up: ProbeServer) -> None:
    """Past `PER_SOURCE` idle sockets from one address, that address's oldest go; another address keeps its own."""
    other = [_from("127.0.0.3", probes_up.port) for _ in range(10)]
    flood = [_from("127.0.0.2", probes_up.port) for _ in range(probe_server.PER_SOURCE + 10)]
    try:
        time.sleep(0.3)
        assert _closed_ones(flood + other) == list(range(10))
        assert get(probes_up.port, "/healthz")[0] == 200
    finally:
        for s in flood + other:
            s.close()


def test_a_probe_is_not_evicted_by_a_burst_from_its_own_address(probes_up: ProbeServer) -> None:
    """Issue 35: the kubelet probes from its node's IP, and anything on the node's network shares it. The probe
    connects and sends its request; before the loop reads it, a burst of idle connections from the same address
    arrives (the loop is held here to line that up) and is accepted in one batch. The probe, the oldest idle
    connection of its address, was evicted first; its whole head waits in the kernel, so now it is answered."""
    assert probes_up._loop is not None
    held = threading.Event()
    probes_up._loop.call_soon_threadsafe(lambda: held.set() or time.sleep(1.0))
    assert held.wait(5)
    probe = _from("127.0.0.7", probes_up.port)
    probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
    flood = [_from("127.0.0.7", probes_up.port) for _ in range(probe_server.PER_SOURCE + 20)]
    try:
        answer = b"".join(iter(lambda: probe.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        assert probes_up.connections.evicted >= 20
    finally:
        for s in [probe, *flood]:
            s.close()


def test_a_slow_readiness_check_blocks_neither_healthz_nor_other_readyz() -> None:
    """Readiness refreshes once at a time: while the API server hangs, /healthz answers at once and
    further /readyz get the last known answer instead of queueing behind the hung call."""
    release = threading.Event()

    def hung_api() -> None:
        release.wait(10)
        raise TemporaryError("API server timed out")

    probes = Probes(Metrics(CollectorRegistry()), Readiness(hung_api))
    server = ProbeServer(bind_listener("127.0.0.1:0"), probes).start()
    try:
        first = threading.Thread(target=get, args=(server.port, "/readyz"))
        first.start()
        time.sleep(0.2)
        started = time.perf_counter()
        assert get(server.port, "/healthz")[0] == 200
        assert get(server.port, "/readyz") == (503, b'{"status":"not ready","error":"not checked yet"}\n')
        assert time.perf_counter() - started < 1.0
    finally:
        release.set()
        first.join(5)
        server.stop()


def test_a_port_in_use_is_a_config_error_naming_the_key() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(ConfigError, match=r"server\.probeListen: cannot listen on 127\.0\.0\.1:\d+"):
            bind_listener(f"127.0.0.1:{taken.getsockname()[1]}")


def test_the_webhook_port_serves_no_probe(reactor: Reactor) -> None:
    """/healthz, /readyz and /metrics live on the probe listener only: on the webhook they are 404."""
    for path in ("/healthz", "/readyz", "/metrics"):
        assert reactor.client.get(path).status_code == 404
    assert reactor.probe("/healthz").status == 200


@pytest.mark.parametrize("server,key", [
    ({"listen": "0.0.0.0:8080", "probeListen": "127.0.0.1:8080"}, "server.probeListen"),
    ({"probeListen": "8081"}, "server.probeListen"),
    ({"readTimeout": "0s"}, "server.readTimeout"),
    ({"readTimeout": "1h"}, "server.readTimeout"),
], ids=["same-port", "no-host", "zero-deadline", "deadline-too-long"])
def test_bad_listener_settings_name_the_key(server: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_settings({"server": server}, {})


def test_listener_settings_defaults_and_environment() -> None:
    default = build_settings({}, {}).server
    assert (default.probe_listen, default.read_timeout.total_seconds()) == ("0.0.0.0:8081", 10.0)
    env = {"REACTOR_SERVER__PROBE_LISTEN": "127.0.0.1:9091", "REACTOR_SERVER__READ_TIMEOUT": "30s"}
    server = build_settings({}, env).server
    assert (server.probe_listen, server.read_timeout.total_seconds()) == ("127.0.0.1:9091", 30.0)
