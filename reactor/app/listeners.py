"""The sockets the serving process listens on, and a look at what a client has sent without reading it.

Apart from the probe server (probe_server.py) so that gunicorn's master, which binds the probe socket before the fork,
imports neither asyncio nor the metrics: what the master imports it holds in its own memory, beside the worker's.
"""

from __future__ import annotations

import socket

from reactor.core.errors import ConfigError

HEAD_LIMIT = 8192  # the longest request head a probe may send (and what `whole_head_waiting` peeks at)


def bind_listener(address: str, *, key: str = "server.probeListen") -> socket.socket:
    """A listening TCP socket on `HOST:PORT` (`[::]:8081` for IPv6); a ConfigError naming `key` when it cannot bind."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ConfigError(key, f"cannot listen on {address}: {e.strerror or e}") from e
    return sock


def whole_head_waiting(fd: int) -> bool:
    """Peek (without reading) at what socket `fd` holds: a whole request head? Nothing, a partial head, or an error:
    False."""
    peek = socket.socket(fileno=fd)
    try:
        return b"\r\n\r\n" in peek.recv(HEAD_LIMIT, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    finally:
        peek.detach()  # the fd stays the transport's
