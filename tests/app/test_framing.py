"""reactor/app/framing.py: when the webhook's event loop hands a connection to a thread."""

from __future__ import annotations

import pytest

from reactor.app.framing import framing

HEAD = b"POST /alerts HTTP/1.1\r\nHost: r\r\n"


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize(("data", "complete"), [
    pytest.param(b"POST /alerts HTTP/1.1\r\nHost: r", False, id="head-half"),
    pytest.param(b"GET /healthz HTTP/1.1\r\n\r\n", True, id="no-body"),
    pytest.param(HEAD + b"Content-Length: 5\r\n\r\nabc", False, id="body-half"),
    pytest.param(HEAD + b"Content-Length: 5\r\n\r\nabcde", True, id="body-whole"),
    pytest.param(HEAD + b"Content-Length: 999999\r\n\r\n", True, id="body-over-the-limit-refused-at-once"),
    pytest.param(HEAD + b"Content-Length: x\r\n\r\n", True, id="bad-length-refused-at-once"),
    pytest.param(HEAD + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", True, id="two-lengths"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"abc")[:-5], False, id="chunked-half"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"abc", b"de"), True, id="chunked-whole"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"0\r\nX-T: 1\r\n\r\n", True, id="trailers"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", True, id="chunk-size-not-hex"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n-5\r\n", True, id="negative-chunk"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcXX", True, id="chunk-not-terminated"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"ffff\r\n", True, id="chunked-over-the-limit"),
    pytest.param(HEAD + b"Transfer-Encoding: gzip\r\n\r\n", True, id="not-chunked-last-refused"),
    pytest.param(HEAD + b"Broken header line\r\n\r\n", True, id="malformed-field"),
    pytest.param(b"X" * 2000, True, id="head-over-its-limit"),
])
def test_framing(data: bytes, complete: bool) -> None:
    assert framing(data, head_limit=1024, body_limit=4096).complete is complete


def test_a_client_that_expects_100_continue_is_told_to_send_its_body() -> None:
    found = framing(HEAD + b"Expect: 100-continue\r\nContent-Length: 10\r\n\r\n", head_limit=1024, body_limit=4096)
    assert found.head_done and found.expects_continue and not found.complete
