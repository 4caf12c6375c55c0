"""The probe listener: `/healthz`, `/readyz` and `/metrics` on a port of their own, served by a thread of their own.

Kubernetes controllers serve health and metrics on a port apart from their webhook, so that the
webhook's load or a hostile client cannot make the kubelet restart them. Here one asyncio loop in a
daemon thread of the gunicorn worker serves them: a slow client costs a socket, not a thread, and is
dropped when its request head is not complete within `HEAD_SECONDS`. A full listener makes room for a new
connection by closing its oldest idle one (no complete head yet), and one source address holds at most
`PER_SOURCE` (see connections.py): a flood of idle sockets is evicted, a probe that sends its request at once
is let in — and is not evicted by a burst from its own address while its request waits to be read. The answers
come from `reactor.observe.probes.Probes`, computed on a small thread pool so a slow API server (readiness) never
blocks the loop. This module must not serve the webhook, and never reads a request body.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http import HTTPStatus

from reactor.app.connections import Connections, Slot
from reactor.app.listeners import HEAD_LIMIT, whole_head_waiting
from reactor.observe.probes import ProbeAnswer, Probes

HEAD_SECONDS = 2.0      # a probe's whole request head; kubelet and Prometheus send theirs at once
WRITE_SECONDS = 5.0     # the whole answer; a client that does not read it is dropped
MAX_CONNECTIONS = 256
PER_SOURCE = 64         # one address (a pod's IP) holds at most a quarter; the kubelet's own is its node's IP


class ProbeServer:
    """Serves `probes` on the bound, listening `sock` until `stop()` (or until the process ends)."""

    def __init__(self, sock: socket.socket, probes: Probes) -> None:
        self._sock = sock
        self._probes = probes
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe-answer")
        self.connections = Connections(MAX_CONNECTIONS, PER_SOURCE)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="probe-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> ProbeServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the probe server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_once(self, timeout: float = 5.0) -> object:
        """Answer one connection on the listener, on the caller's thread (no serving thread running): True when
        one came within `timeout`."""
        return asyncio.run(self._serve_one(timeout))

    def _run(self) -> None:
        asyncio.run(self._serve_forever())

    async def _serve_one(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        self._sock.setblocking(False)
        try:
            conn, _ = await asyncio.wait_for(loop.sock_accept(self._sock), timeout)
        except TimeoutError:
            return False
        reader, writer = await asyncio.open_connection(sock=conn, limit=HEAD_LIMIT)
        await self._client(reader, writer)
        return True

    async def _serve_forever(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._client, sock=self._sock, limit=HEAD_LIMIT)
        self._ready.set()
        async with server:
            await self._stopping.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        slot = self.connections.admit(_source(writer), writer.transport.abort, partial(_sent_head, writer))
        if slot is None:
            writer.transport.abort()
            return
        try:
            await self._exchange(reader, writer, slot)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass  # a slow, oversized, evicted or vanished client: dropped, nothing to answer
        finally:
            self.connections.release(slot)
            if not writer.is_closing():
                writer.transport.abort()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: Slot) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        self.connections.busy(slot)
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(request_line) != 3 or not request_line[2].startswith("HTTP/1."):
            answer = ProbeAnswer(400, "text/plain", b"bad request\n")
            method = "GET"
        else:
            method, path = request_line[0], request_line[1]
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(self._pool, self._probes.answer, method, path)
        writer.write(_encode(answer, head_only=method == "HEAD"))
        await asyncio.wait_for(writer.drain(), WRITE_SECONDS)
        writer.close()
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(writer.wait_closed(), WRITE_SECONDS)


def _source(writer: asyncio.StreamWriter) -> str:
    """The peer's address (without its port): what a per-source cap counts."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


def _sent_head(writer: asyncio.StreamWriter) -> bool:
    """Does the connection's whole request head wait in the kernel, not yet read by the loop?"""
    transport_socket = writer.get_extra_info("socket")
    return transport_socket is not None and whole_head_waiting(transport_socket.fileno())


def _encode(answer: ProbeAnswer, *, head_only: bool) -> bytes:
    reason = HTTPStatus(answer.status).phrase
    head = (f"HTTP/1.1 {answer.status} {reason}\r\nContent-Type: {answer.content_type}\r\n"
            f"Content-Length: {len(answer.body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n")
    return head.encode("latin-1") + (b"" if head_only else answer.body)
