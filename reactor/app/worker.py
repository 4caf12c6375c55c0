"""The webhook's gunicorn worker: gthread, except that a thread only ever sees a whole request.

Why: gthread hands a connection to a thread as soon as it is accepted (gunicorn 27 waits there up to 5 s for its
first byte), and the thread then reads the request with blocking calls. 64 unauthenticated clients trickling a
byte at a time held every thread for `server.readTimeout` each, and a real notification waited past
Alertmanager's 10 s timeout. Here the worker's own event loop (gthread's poller, one thread) reads each request's
head and body without blocking (framing.py says when it is whole), and only then submits it to the thread pool
with the bytes already read. A slow client costs a buffer, not a thread; one that is not done within
`server.readTimeout` is closed unanswered (head incomplete) or answered 408 by the application (body incomplete);
one whose body is cut short by EOF is answered 400;
a full worker evicts its oldest unfinished connection, and one source address holds at most `PER_SOURCE` of
them (connections.py). Requests on kept-alive connections go through the same loop.

TLS connections are not buffered (their bytes are ciphertext until a thread has done the handshake): they keep
the per-read and whole-request deadlines of `DeadlineReader` and `_BoundedSocket`. This module must not decide
anything about the request: gunicorn's parser and the application still read and judge it.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from gunicorn.workers import gthread

from reactor.app.connections import Connections, Slot
from reactor.app.framing import framing
from reactor.app.listeners import whole_head_waiting

if TYPE_CHECKING:  # the class is the worker's: gunicorn's master imports this module, not werkzeug's
    from reactor.app.reads import DeadlineReader

BUFFERING = 512     # unfinished requests held at once (gunicorn's worker_connections is 1000)
PER_SOURCE = 64     # ... of them from one address
RECV = 65536
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Connection(gthread.TConn):
    """A connection whose reads are bounded: per read (`keepalive`) and per request (`read_timeout`).

    `preload`: the bytes the event loop read already, given to gunicorn's parser before the socket. `expired`:
    the request's deadline passed while its body was still coming; the parser's next socket read raises the
    deadline at once (the application answers 408). The socket's own timeout also bounds each write of the
    answer (a client that does not read it).
    """

    read_timeout = 10.0
    reader: DeadlineReader | None = None
    preload = b""
    expired = False
    deadline = 0.0
    received = b""
    continued = False

    def init(self) -> None:
        super().init()
        self.sock.settimeout(self.cfg.keepalive)
        unreader = getattr(self.parser, "unreader", None)
        if self.reader is None and unreader is not None and hasattr(unreader, "sock"):
            from reactor.app.reads import DeadlineReader  # in the worker only (see TYPE_CHECKING above)

            self.reader = DeadlineReader(self.sock, idle=self.cfg.keepalive, total=self.read_timeout)
            unreader.sock = self.reader

    def take_preload(self) -> None:
        """Give the parser what the event loop read (before the first socket read of this request)."""
        unreader = getattr(self.parser, "unreader", None)
        if self.preload and unreader is not None:
            unreader.unread(self.preload)
            self.preload = b""
        if self.reader is not None:
            self.reader.restart()
            if self.expired:
                self.reader.expire()
        self.expired = False


class _BoundedSocket(socket.socket):
    """An accepted client socket whose blocking mode always has a timeout.

    gthread puts a connection in blocking mode (no timeout) before the TLS handshake, so a client that
    sends half a ClientHello would hold the thread for ever; with this, the handshake (which CPython
    bounds as a whole by the socket's timeout) and every other blocking call end after `idle` seconds.
    """

    idle = 5.0

    @classmethod
    def adopt(cls, sock: socket.socket, idle: float) -> _BoundedSocket:
        bounded = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        bounded.idle = idle
        return bounded

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(self.idle)
        else:
            super().setblocking(False)


class ReadTimeoutWorker(gthread.ThreadWorker):
    """gunicorn's gthread worker that reads whole requests in its event loop before a thread takes them."""

    connection_class: type[_Connection] = _Connection
    body_limit = 8 << 20

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.door = Connections(BUFFERING, PER_SOURCE)
        self.buffering: dict[_Connection, Slot] = {}

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        client_sock = _BoundedSocket.adopt(client_sock, self.cfg.keepalive)
        conn = self.connection_class(self.cfg, client_sock, client_addr, listener.getsockname())
        if self.cfg.is_ssl:
            self.enqueue_req(conn)
        else:
            self._read_request(conn)

    def on_client_socket_readable(self, conn: _Connection, client: Any) -> None:
        """A kept-alive connection's next request begins: read it in the loop too."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        if self.cfg.is_ssl:
            self.enqueue_req(conn)
        else:
            self._read_request(conn)

    def _read_request(self, conn: _Connection) -> None:
        source = str(conn.client[0]) if isinstance(conn.client, tuple) and conn.client else "?"
        slot = self.door.admit(source, partial(self._drop, conn), partial(whole_head_waiting, conn.sock.fileno()))
        if slot is None:
            self._close(conn)
            return
        self.buffering[conn] = slot
        conn.received, conn.continued = b"", False
        conn.deadline = time.monotonic() + conn.read_timeout
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_bytes, conn))

    def _on_bytes(self, conn: _Connection, _client: Any) -> None:
        try:
            chunk = conn.sock.recv(RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._ended(conn)
            return
        conn.received += chunk
        found = framing(conn.received, head_limit=self._head_limit(), body_limit=self.body_limit)
        if found.complete:
            self._dispatch(conn)
        elif found.expects_continue and not conn.continued:
            conn.continued = True
            try:
                conn.sock.send(CONTINUE)
            except OSError:
                self._drop(conn)

    def _ended(self, conn: _Connection) -> None:
        """The client closed its side (EOF) before its request was whole. With the head read, the body was cut
        short: the request goes to a thread as it is, the parser meets the EOF, and the application answers 400
        (reads.py) on the half-open connection. Without a whole head there is nothing to answer."""
        if framing(conn.received, head_limit=self._head_limit(), body_limit=self.body_limit).head_done:
            self._dispatch(conn)
        else:
            self._drop(conn)

    def _head_limit(self) -> int:
        return int(self.cfg.limit_request_line) + int(self.cfg.limit_request_fields) * \
            int(self.cfg.limit_request_field_size or 8190)

    def _dispatch(self, conn: _Connection, *, expired: bool = False) -> None:
        self._forget(conn)
        conn.preload, conn.received, conn.expired = conn.received, b"", expired
        conn.data_ready = True
        self.enqueue_req(conn)

    def _forget(self, conn: _Connection) -> None:
        slot = self.buffering.pop(conn, None)
        if slot is not None:
            self.door.release(slot)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)

    def _drop(self, conn: _Connection) -> None:
        """Close an unfinished request unanswered (evicted, vanished, or its head never came)."""
        if conn in self.buffering:
            self._forget(conn)
            self._close(conn)

    def _close(self, conn: _Connection) -> None:
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c in self.buffering if c.deadline <= now]:
            if framing(conn.received, head_limit=self._head_limit(), body_limit=self.body_limit).head_done:
                self._dispatch(conn, expired=True)  # the body is late: the application answers 408
            else:
                self._drop(conn)

    def handle(self, conn: _Connection) -> Any:
        if not self.cfg.is_ssl:
            conn.init()  # the parser, so that it reads what the loop read first
            conn.take_preload()
        elif conn.reader is not None:
            conn.reader.restart()  # each request on a kept-alive connection gets its own deadline
        return super().handle(conn)


def worker_class(read_timeout: float, body_limit: int = 8 << 20) -> type[ReadTimeoutWorker]:
    """`ReadTimeoutWorker` whose connections must deliver a whole request within `read_timeout` seconds."""
    connection = type("_Connection", (_Connection,), {"read_timeout": read_timeout})
    return type("ReadTimeoutWorker", (ReadTimeoutWorker,), {"connection_class": connection,
                                                            "body_limit": body_limit})
