"""The generator's own ceiling: a raw socket server that answers every request with a fixed 200.

It reads only what HTTP/1.1 keep-alive framing needs (the header block and `Content-Length`
bytes of body) and parses nothing else, so a load run against it measures the load generator,
not a server. Run as a child process: `python -m bench.rawserver PORT`.
"""

from __future__ import annotations

import socket
import sys
import threading

ANSWER = b'{"status":"ok"}'
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER)


def _content_length(head: bytes) -> int:
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = lower.find(b"\r\n", at + 2)
    return int(lower[at + 17:end if end >= 0 else None].strip() or 0)


def serve_connection(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            remaining = _content_length(head) - len(buffer)
            chunks = [buffer]
            while remaining > 0:
                chunk = conn.recv(min(remaining, 1 << 20))
                if not chunk:
                    return
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
            buffer = data[len(data) + remaining:] if remaining < 0 else b""
            conn.sendall(RESPONSE)


def serve(port: int) -> None:
    with socket.create_server(("127.0.0.1", port), backlog=64) as server:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
