"""The webhook's bounded reads (reactor/app/reads.py), without a server: a socket pair and a clock."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from gunicorn.http.errors import InvalidChunkSize, NoMoreData
from werkzeug.exceptions import BadRequest, RequestTimeout

from reactor.app.reads import DeadlineReader, RequestDeadline, _GuardedInput
from tests.support import Ticks


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_the_deadline_is_for_the_whole_request_not_each_read(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    clock = Ticks(100.0)
    reader = DeadlineReader(server, idle=5.0, total=10.0, clock=clock)
    for second in range(10):  # a byte a second: each read well within the idle timeout
        clock.now = 100.0 + second
        client.sendall(b"x")
        assert reader.recv(10) == b"x"
    clock.now = 110.0
    client.sendall(b"y")
    with pytest.raises(RequestDeadline):
        reader.recv(10)  # data is there, but the request's time is up


def test_a_read_waits_at_most_what_is_left_of_the_deadline(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    clock = Ticks(100.0)
    reader = DeadlineReader(server, idle=5.0, total=10.0, clock=clock)
    client.sendall(b"a")
    assert reader.recv(1) == b"a"  # the deadline starts: 110.0
    clock.now = 109.8  # 0.2 s left: the socket waits that long for the silent client, not the idle 5 s
    with pytest.raises(RequestDeadline):
        reader.recv(10)
    assert server.gettimeout() == pytest.approx(0.2)


def test_restart_gives_the_next_request_its_own_deadline(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    clock = Ticks(100.0)
    reader = DeadlineReader(server, idle=5.0, total=10.0, clock=clock)
    client.sendall(b"a")
    assert reader.recv(1) == b"a"
    clock.now = 150.0
    reader.restart()
    client.sendall(b"b")
    assert reader.recv(1) == b"b"


def test_a_deadline_is_what_gunicorn_treats_as_a_quiet_disconnect() -> None:
    assert issubclass(RequestDeadline, NoMoreData)


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, size: int | None = None) -> bytes:
        raise self.error

    readline = read


@pytest.mark.parametrize("error,expected,message", [
    (RequestDeadline(), RequestTimeout, "not received within its deadline"),
    (InvalidChunkSize(b"zz"), BadRequest, "malformed request body: Invalid chunk size"),
    (NoMoreData(), BadRequest, "ended before its end"),
], ids=["deadline-408", "bad-chunk-400", "cut-by-eof-400"])
def test_body_read_errors_become_http_errors(error: Exception, expected: type[Exception], message: str) -> None:
    stream = _GuardedInput(Failing(error))
    for read in (stream.read, stream.readline):
        with pytest.raises(expected, match=message):
            read(10)
