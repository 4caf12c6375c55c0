"""Whether some bytes hold a whole HTTP/1.x request: the test the webhook's event loop applies before a thread
sees a connection (buffered.py).

"Whole" also means "enough to refuse": a head or body past its limit, or a framing the parser will reject, is
handed on at once, so a thread answers it (400, 413, 431) without ever waiting on the client. Pure, no I/O; it
decides nothing about the payload, and gunicorn's parser still reads the request itself.
"""

from __future__ import annotations

from dataclasses import dataclass

_CRLF = b"\r\n"
_LINE_LIMIT = 4096  # a chunk-size line this long is malformed (the parser refuses it)


@dataclass(frozen=True, slots=True)
class Framing:
    """What the head says about the request: `complete` (a thread may take it), and `expects_continue`
    (the client waits for `100 Continue` before it sends its body)."""

    complete: bool
    head_done: bool = False
    expects_continue: bool = False


def framing(data: bytes, *, head_limit: int, body_limit: int) -> Framing:
    """How far `data` (a connection's bytes so far) is from a whole request."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return Framing(complete=len(data) > head_limit)
    fields: dict[str, list[str]] = {}
    for line in data[:end].decode("latin-1").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return Framing(complete=True, head_done=True)  # malformed: the parser answers 400
        fields.setdefault(name.strip().lower(), []).append(value.strip())
    body = data[end + 4:]
    expects = any(v.lower() == "100-continue" for v in fields.get("expect", []))
    return Framing(complete=_body_complete(fields, body, body_limit), head_done=True, expects_continue=expects)


def _body_complete(fields: dict[str, list[str]], body: bytes, body_limit: int) -> bool:
    if "transfer-encoding" in fields:
        codings = [c.strip().lower() for v in fields["transfer-encoding"] for c in v.split(",")]
        return codings[-1:] != ["chunked"] or chunked_complete(body, body_limit)
    lengths = fields.get("content-length")
    if not lengths:
        return True
    if len(set(lengths)) != 1 or not lengths[0].isdigit():
        return True  # the parser refuses it
    size = int(lengths[0])
    return size > body_limit or len(body) >= size


def chunked_complete(body: bytes, body_limit: int) -> bool:
    """A chunked body up to its last chunk and the blank line after its trailers; or malformed, or past
    `body_limit` (either way nothing more is worth waiting for)."""
    pos, total = 0, 0
    while True:
        eol = body.find(_CRLF, pos)
        if eol < 0:
            return len(body) - pos > _LINE_LIMIT
        text = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            return True
        if size < 0 or text.startswith((b"-", b"+")):
            return True
        if size == 0:
            trailers = body[eol + 2:]
            return trailers.startswith(_CRLF) or b"\r\n\r\n" in trailers or len(trailers) > _LINE_LIMIT
        total += size
        if total > body_limit:
            return True
        end = eol + 2 + size
        if len(body) < end + 2:
            return False
        if body[end:end + 2] != _CRLF:
            return True
        pos = end + 2
