"""No way in without the token: almost-right tokens, constant-time comparison, rotation and an
unreadable token file on the running server, and optional TLS.

Every refused request must leave the cluster untouched: no write, not even a read.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import socket
import ssl
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor.intake.bearer import CHECK_SECONDS
from reactor.intake.web import TokenFile
from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.reliability.figures import FIGURES
from tests.reliability.harness import TOKEN, Child, deployment_doc, namespace_docs, seed, serving, writes

POLICY = {"namespaces": {"allow": ["ml"]}}
BODY = notification([AlertSpec("GPUIdle", "ml", "ghost-5b6c7d8e9f-abcde", "main", 0.0, 4)])


def _flip(text: str, i: int) -> str:
    return text[:i] + ("x" if text[i] != "x" else "y") + text[i + 1:]


ALMOST = {
    "missing": None, "empty": "", "scheme-only": "Bearer", "scheme-space": "Bearer ", "basic": "Basic " + TOKEN,
    "lowercase-scheme": "bearer " + TOKEN, "no-scheme": TOKEN, "first-char-off": "Bearer " + _flip(TOKEN, 0),
    "last-char-off": "Bearer " + _flip(TOKEN, len(TOKEN) - 1), "prefix": "Bearer " + TOKEN[:-1],
    "token-plus-suffix": "Bearer " + TOKEN + "0", "token-plus-word": "Bearer " + TOKEN + " extra",
    "doubled": "Bearer " + TOKEN + TOKEN, "latin-1": "Bearer " + TOKEN[:-1] + "\u00e9", "empty-token-file-guess": "Bearer \"\"",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Child]]:
    docs = namespace_docs("ml") + [deployment_doc("ml", "web")]
    with serving("auth", tmp_path_factory.mktemp("auth"), POLICY, docs) as served:
        yield served


@pytest.fixture
def served(server: tuple[SimCluster, Child]) -> Iterator[tuple[SimCluster, Child]]:
    """The shared server; whatever a test did to the token file, the next one finds it as it was."""
    path = server[1].workdir / f"{server[1].name}.token"
    try:
        yield server
    finally:
        rotate(path, TOKEN)


def post_with(child: Child, header: str | None) -> Any:
    headers = {"Content-Type": "application/json"}
    if header is not None:
        headers["Authorization"] = header
    return child.post_raw(json.dumps(BODY).encode(), headers)


def test_almost_right_tokens_are_refused_by_the_running_server(served: tuple[SimCluster, Child]) -> None:
    sim, child = served
    refused_before = child.metric("reactor_webhook_requests_total", code="401")
    sim.reset_counters()
    for name, header in ALMOST.items():
        answer = post_with(child, header)
        assert (answer.status, answer.body) == (401, {"error": "missing or wrong bearer token"}), name
    assert sum(sim.requests.values()) == 0, f"a refused request reached the API server: {sim.requests}"
    assert child.metric("reactor_webhook_requests_total", code="401") - refused_before == len(ALMOST)
    assert post_with(child, "Bearer " + TOKEN).status == 200  # the control: the right token gets in
    FIGURES.add("auth", deliveries=len(ALMOST) + 1, fuzz_cases=len(ALMOST))


def timing_medians(check: Callable[[str], bool], candidates: dict[str, str], rounds: int) -> dict[str, float]:
    """Low-decile µs per candidate (the time without the machine's other work: load only ever adds time), samples
    interleaved in a varying order so drift hits all alike."""
    samples: dict[str, list[int]] = {k: [] for k in candidates}
    order = list(candidates)
    for r in range(rounds):
        random.Random(r).shuffle(order)
        for k in order:
            started = time.perf_counter_ns()
            check(candidates[k])
            samples[k].append(time.perf_counter_ns() - started)
    return {k: statistics.quantiles(v, n=10)[0] / 1000 for k, v in samples.items()}


def leaks(check: Callable[[str], bool], candidates: dict[str, str]) -> tuple[bool, dict[str, float]]:
    """Is there a difference worth measuring? Spread of medians above 10% of the fastest."""
    medians = timing_medians(check, candidates, rounds=150)
    return max(medians.values()) - min(medians.values()) > 0.10 * min(medians.values()), medians


class NaiveToken(TokenFile):
    """The comparison the reactor must not use: `==` stops at the first differing byte."""

    def matches(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        return header[7:].strip().encode("utf-8", "replace") == self.current()


def test_the_token_comparison_takes_as_long_wherever_the_guess_is_wrong(tmp_path: Path) -> None:
    """With a 1 MiB token, a short-circuiting comparison shows ~40% between first- and last-byte
    mismatches; `hmac.compare_digest` shows noise (<2%). The bound (10%) sits between, the naive
    comparison proves the measurement can see a leak, and a leak is seen on every try while noise
    is not: up to five tries, one clean one is enough."""
    secret = random.Random(7).randbytes(1 << 19).hex()  # 1 MiB of hex
    path = tmp_path / "token"
    path.write_text(secret)
    candidates = {"wrong-at-start": "Bearer " + _flip(secret, 0), "wrong-at-end": "Bearer " + _flip(secret, len(secret) - 1),
                  "wrong-in-middle": "Bearer " + _flip(secret, len(secret) // 2), "right-length-wrong": "Bearer " + "z" * len(secret)}
    real, naive = TokenFile(str(path)), NaiveToken(str(path))
    assert not any(real.matches(c) or naive.matches(c) for c in candidates.values())
    assert real.matches("Bearer " + secret) and naive.matches("Bearer " + secret)
    tries = _until(lambda: not leaks(real.matches, candidates)[0], real.matches, candidates)
    assert tries is None, f"timing differs with the guess on every try: {tries}"
    naive_tries = _until(lambda: leaks(naive.matches, candidates)[0], naive.matches, candidates)
    assert naive_tries is None, f"the measurement cannot see a leak: {naive_tries}"


def _until(clean: Callable[[], bool], check: Callable[[str], bool], candidates: dict[str, str],
           tries: int = 5) -> list[dict[str, float]] | None:
    """None as soon as one try shows what is expected (noise on a loaded machine fails single tries, never all five
    the same way a real leak does); otherwise the medians of every try, for the failure message."""
    for _ in range(tries):
        if clean():
            return None
    return [timing_medians(check, candidates, rounds=50) for _ in range(2)]


def rotate(path: Path, token: str) -> None:
    """As the kubelet updates a mounted Secret: write a new file, then swap it in atomically; then wait for the
    reactor's next check of the file (at most every CHECK_SECONDS)."""
    fresh = path.with_suffix(".new")
    fresh.write_text(token + "\n")
    os.replace(fresh, path)
    time.sleep(CHECK_SECONDS + 0.05)


def test_the_token_rotates_on_the_running_server_without_a_restart(served: tuple[SimCluster, Child]) -> None:
    sim, child = served
    path = child.workdir / f"{child.name}.token"
    pid = child.proc.pid if child.proc else None
    for new in ("rotated-" + TOKEN[8:], "same-len-" + TOKEN[9:]):
        old = path.read_text().strip()
        rotate(path, new)
        assert post_with(child, "Bearer " + old).status == 401
        assert post_with(child, "Bearer " + new).status == 200
    assert child.proc is not None and child.proc.pid == pid and child.proc.poll() is None
    FIGURES.add("auth", deliveries=4)


def test_an_unreadable_token_file_fails_closed_with_503(served: tuple[SimCluster, Child]) -> None:
    """A half-written or missing Secret lets nobody in, and asks Alertmanager to retry (not a 500)."""
    sim, child = served
    path = child.workdir / f"{child.name}.token"
    sim.reset_counters()
    answers = []
    for broken in ("empty", "missing"):
        if broken == "empty":
            path.write_text("")
        else:
            path.unlink()
        time.sleep(CHECK_SECONDS + 0.05)  # the reactor's next check of the file
        right = post_with(child, "Bearer " + TOKEN)
        assert (right.status, right.body) == (503, {"error": "the webhook token cannot be read; retry"}), (broken, right)
        answers.append(right)
        for header in ("Bearer wrong", "Bearer ", "Bearer \"\"", None):  # no token file: nothing matches
            answer = post_with(child, header)
            answers.append(answer)
            assert answer.status in (401, 503), (broken, header, answer.status, answer.body)
    assert writes(sim) == 0 and sum(sim.requests.values()) == 0
    rotate(path, TOKEN)
    assert post_with(child, "Bearer " + TOKEN).status == 200
    FIGURES.add("auth", deliveries=len(answers) + 1, answers_503=sum(a.status == 503 for a in answers))


def self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("no `openssl` on PATH and the `cryptography` package is not installed: cannot make a certificate")
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_serves_https_and_refuses_plain_http(cluster: SimCluster, spawn: Callable[..., Child], tmp_path: Path) -> None:
    seed(cluster, namespace_docs("ml"))
    child = spawn(cluster, policy=POLICY, tls=self_signed(tmp_path))
    assert child.get("/alerts")[0] == 405  # HTTPS answers on the webhook port; the probes are on their own
    assert child.probe("/healthz") == (200, b'{"status":"ok"}\n')
    assert child.post(BODY).status == 200
    assert post_with(child, "Bearer wrong").status == 401
    # The certificate is checked: a client that trusts nothing else refuses an unknown one.
    strict = http.client.HTTPSConnection("127.0.0.1", child.port, timeout=5, context=ssl.create_default_context())
    with pytest.raises(ssl.SSLError):
        strict.request("GET", "/healthz")
    strict.close()
    # Plain HTTP to the TLS port gets no HTTP answer at all.
    plain = http.client.HTTPConnection("127.0.0.1", child.port, timeout=5)
    try:
        plain.request("POST", "/alerts", body=b"{}", headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
        status = plain.getresponse().status
    except (OSError, http.client.HTTPException):
        status = None
    finally:
        plain.close()
    assert status is None or status >= 400, f"plain HTTP was answered {status}"
    FIGURES.add("auth", deliveries=3)


def test_slow_clients_without_a_token_cannot_stall_the_server(served: tuple[SimCluster, Child]) -> None:
    sim, child = served
    stalled = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", child.port), timeout=5)
            s.sendall(b"POST /alerts HTTP/1.1\r\nHost: reactor\r\nContent-Type: application/json\r\n")  # and nothing more
            stalled.append(s)
        time.sleep(0.5)
        try:  # the probes do not share the webhook's threads; stalled clients are dropped after 5 s anyway
            status = child.probe("/healthz", timeout=10)[0]
        except (OSError, http.client.HTTPException):
            status = None
        assert status == 200, "the server stopped answering while slow clients held its threads"
    finally:
        for s in stalled:
            s.close()
