"""Child processes for the demo and the test, reliability and bench harnesses: start, wait until ready, stop.

One place knows how to run `reactor serve` (or a peer such as the bench's echo server) as a child in
its own session, wait until it answers 200 on a readiness path, and stop it together with its own
children (gunicorn's master and worker) — also when the caller fails half-way. It never signals a
process it did not start.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT = 30.0
POLL_SECONDS = 0.1


class LaunchError(RuntimeError):
    """A child exited before it was ready, or was not ready in time; the message ends with its log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; a race with another process is possible but rare)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def state_key_file(folder: str | os.PathLike[str]) -> Path:
    """`folder/state-key`, created with a random key if missing: the demo's and the harnesses' signing key.

    Shared by every reactor started with the same folder, as replicas share the mounted Secret, and
    kept across restarts, so a restarted child verifies what it wrote before.
    """
    path = Path(folder) / "state-key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


@dataclass
class Child:
    """A started child: its process, the port it serves, and the file its output goes to (None: inherited)."""

    popen: subprocess.Popen[bytes]
    port: int
    log: Path | None = None
    scheme: str = "http"

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def tail(self, lines: int = 40) -> str:
        if self.log is None:
            return ""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to the child's process group (gunicorn's master stops its worker), SIGKILL past `timeout`."""
        if self.popen.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the whole group at once: a crash, as a node failure would do it."""
        if self.popen.poll() is None:
            self._signal(signal.SIGKILL)
            self.popen.wait(timeout=10)

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signum)


def start_process(argv: Sequence[str], *, port: int, log: Path | None = None, env: Mapping[str, str] | None = None,
                  cwd: str | os.PathLike[str] | None = None, ready_path: str | None = "/readyz",
                  cafile: str | None = None, timeout: float = READY_TIMEOUT) -> Child:
    """Start `argv` in its own session; return once `ready_path` answers 200 (or, with None, the port accepts).

    With `cafile` the readiness check speaks TLS and trusts that CA. `KUBERNETES_SERVICE_HOST` is removed from
    the child's environment so that a run inside a pod never picks the in-cluster config by accident.
    """
    environ = dict(os.environ, **(env or {}))
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    out = log.open("ab") if log is not None else None
    try:
        popen = subprocess.Popen(
            list(argv),
            env=environ,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,
        )
    finally:
        if out is not None:
            out.close()
    child = Child(popen, port, log, "https" if cafile else "http")
    try:
        _wait_ready(child, ready_path, cafile, timeout, name=" ".join(argv[:4]))
    except BaseException:
        child.stop(timeout=5)
        raise
    return child


def start_serve(
    config: str | os.PathLike[str],
    *,
    token_file: str | os.PathLike[str],
    kubeconfig: str | os.PathLike[str],
    port: int = 0,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    tls: tuple[str, str] | None = None,
    timeout: float = READY_TIMEOUT,
) -> Child:
    """`reactor serve --config CONFIG` on 127.0.0.1:`port` (0: a free one) with its token file and kubeconfig."""
    port = port or free_port()
    environ = {
        "REACTOR_SERVER__TOKEN_FILE": str(token_file),
        "REACTOR_KUBE__KUBECONFIG": str(kubeconfig),
        "REACTOR_SERVER__LISTEN": f"127.0.0.1:{port}",
        "REACTOR_STATE__KEY_FILE": str(state_key_file(Path(token_file).parent)),
    }
    if tls is not None:
        environ.update(REACTOR_SERVER__TLS_CERT=tls[0], REACTOR_SERVER__TLS_KEY=tls[1])
    environ.update(env or {})
    return start_process(
        [sys.executable, "-m", "reactor", "serve", "--config", str(config)],
        port=port,
        log=log,
        env=environ,
        cafile=tls[0] if tls else None,
        timeout=timeout,
    )


def _wait_ready(child: Child, path: str | None, cafile: str | None, timeout: float, *, name: str) -> None:
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.popen.poll() is not None:
            raise LaunchError(f"{name} exited with {child.popen.returncode}:\n{child.tail()}")
        if _answers(child, path, context):
            return
        time.sleep(POLL_SECONDS)
    raise LaunchError(f"{name} was not ready at {child.url} within {timeout:.0f} s:\n{child.tail()}")


def _answers(child: Child, path: str | None, context: ssl.SSLContext | None) -> bool:
    try:
        if path is None:
            with socket.create_connection(("127.0.0.1", child.port), timeout=1):
                return True
        with urllib.request.urlopen(f"{child.url}{path}", timeout=2, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False
