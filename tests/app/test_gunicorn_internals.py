"""What reactor/app/worker.py takes from gunicorn's gthread worker beyond its documented settings: these names and
their arguments. The dependency is no longer pinned below the next major version; this test is what fails, by name,
when a release moves one of them (the worker's behaviour is then asserted end to end by tests/app/test_framing.py,
tests/reliability/test_front_door.py and test_slow_clients.py)."""

from __future__ import annotations

import inspect
import socket

import pytest
from gunicorn.http.errors import NoMoreData, ParseException
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers import gthread

from reactor.app.worker import ReadTimeoutWorker, _Connection


@pytest.mark.parametrize("method,parameters", [
    ("accept", ["self", "listener"]),
    ("on_client_socket_readable", ["self", "conn", "client"]),
    ("enqueue_req", ["self", "conn"]),
    ("murder_pending", ["self"]),
    ("handle", ["self", "conn"]),
], ids=lambda v: v if isinstance(v, str) else ",".join(v))
def test_the_worker_methods_overridden_keep_their_arguments(method: str, parameters: list[str]) -> None:
    assert list(inspect.signature(getattr(gthread.ThreadWorker, method)).parameters) == parameters
    assert method in vars(ReadTimeoutWorker) or method == "enqueue_req"  # ours overrides all but the one it calls


def test_the_connection_keeps_what_the_worker_reads_and_sets() -> None:
    """TConn(cfg, sock, client, server), its `init()` that builds the parser, and the attributes the loop uses."""
    assert list(inspect.signature(gthread.TConn.__init__).parameters) == ["self", "cfg", "sock", "client", "server"]
    assert issubclass(_Connection, gthread.TConn) and callable(gthread.TConn.init)
    a, b = socket.socketpair()
    try:
        from gunicorn.config import Config

        conn = gthread.TConn(Config(), a, ("127.0.0.1", 1), ("127.0.0.1", 2))
        assert (conn.sock, conn.client, conn.data_ready) == (a, ("127.0.0.1", 1), False)
        conn.init()
        assert isinstance(conn.parser.unreader, SocketUnreader) and conn.parser.unreader.sock is a
    finally:
        a.close()
        b.close()


def test_the_worker_state_the_loop_uses_is_where_it_was() -> None:
    """The poller (a selector, set in init_process), the kept-alive connections and the connection count."""
    source = inspect.getsource(gthread.ThreadWorker)
    for needle in ("self.poller = selectors.DefaultSelector()", "self.keepalived_conns = deque()",
                   "self.nr_conns = 0", "self.poller.register(listener, selectors.EVENT_READ, self.accept)"):
        assert needle in source, f"gthread no longer has: {needle}"


def test_the_errors_the_reads_translate_keep_their_bases() -> None:
    """reads.py: RequestDeadline is a NoMoreData (closed quietly by gunicorn); parse errors are ParseExceptions."""
    assert issubclass(NoMoreData, OSError) and not issubclass(NoMoreData, ParseException)
    unreader = SocketUnreader(socket.socket())
    try:
        assert hasattr(unreader, "unread") and hasattr(unreader, "sock")
    finally:
        unreader.sock.close()
