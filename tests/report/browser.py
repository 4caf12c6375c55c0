"""A headless chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: NUL-separated
JSON on file descriptors 3 and 4), so a test sees the page's console and network errors and takes a screenshot,
with no websocket library. Messages are the protocol's (chromedevtools.github.io/devtools-protocol): Target,
Runtime, Log, Page."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Loaded:
    """What the page did: console errors and warnings, uncaught exceptions, browser log errors (a failed load)."""

    errors: list[str] = field(default_factory=list)


class _Pipe:
    def __init__(self, process: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.process, self.write_fd, self.read_fd = process, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        return self.next_id

    def messages(self, deadline: float) -> Iterator[dict[str, Any]]:
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                yield json.loads(raw)
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise AssertionError("chromium closed the pipe")
            self.buffer += chunk
        raise AssertionError("chromium did not answer in time")

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None, *,
             seen: list[dict[str, Any]], timeout: float = 60) -> dict[str, Any]:
        wanted = self.send(method, params, session)
        for message in self.messages(time.monotonic() + timeout):
            if message.get("id") == wanted:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            seen.append(message)
        raise AssertionError("unreachable")


@contextmanager
def chromium() -> Iterator[_Pipe]:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("chromium not installed (apt-get install --no-install-recommends chromium)")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
             "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,2400", "about:blank"]
    # The child reads commands on fd 3, writes answers on fd 4: bash wires them (dash takes one-digit fds only).
    wired = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w}'
    process = subprocess.Popen(["/bin/bash", "-c", wired, binary, *flags], pass_fds=(to_child_r, from_child_w),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_child_r)
    os.close(from_child_w)
    try:
        yield _Pipe(process, to_child_w, from_child_r)
    finally:
        process.kill()
        process.wait(timeout=10)
        os.close(to_child_w)
        os.close(from_child_r)


def load(page: Path, screenshot: Path, *, timeout: float = 60) -> Loaded:
    """Open `page` offline, wait for its load event, write a full-page PNG to `screenshot`; what went wrong."""
    loaded = Loaded()
    seen: list[dict[str, Any]] = []
    with chromium() as pipe:
        target = pipe.call("Target.createTarget", {"url": "about:blank"}, seen=seen)["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True}, seen=seen)["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            pipe.call(domain, session=session, seen=seen)
        pipe.call("Page.navigate", {"url": page.as_uri()}, session=session, seen=seen)
        deadline = time.monotonic() + timeout
        if not any(m.get("method") == "Page.loadEventFired" for m in seen):
            for message in pipe.messages(deadline):
                seen.append(message)
                if message.get("method") == "Page.loadEventFired":
                    break
        shot = pipe.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                         session=session, seen=seen)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
    for m in seen:
        params = m.get("params", {})
        if m.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            loaded.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif m.get("method") == "Runtime.exceptionThrown":
            loaded.errors.append(params["exceptionDetails"].get("text", "exception"))
        elif m.get("method") == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
            loaded.errors.append(params["entry"].get("text", ""))
    return loaded
